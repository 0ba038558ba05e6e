import Foundation
import Testing
@testable import DownloaderEngine

/// `SSRFGuardLiveTests` again, through a real Squid (default configuration) in a loopback-only
/// network namespace (run by `LoopbackNamespaceRunTests`): every bypass spelling is still refused,
/// allow and deny rules work exactly as without a proxy, and the proxy is only ever asked to
/// tunnel to an address the guard vetted. Origins listen on port 443 (what Squid tunnels to).
@Suite(.serialized, .enabled(if: LoopbackNamespace.isInside), .timeLimit(.minutes(3)))
struct ProxiedGuardTests {
    static func engine(_ squid: SquidProxy, _ configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        try SSRFGuardLiveTests.engine {
            $0.upstreamProxy = squid.url
            configure(&$0)
        }
    }

    /// A resolver that answers from a table and remembers what it was asked.
    final class TableResolver: HostResolver, @unchecked Sendable {
        private let answers: [String: [IPAddress]]
        private let asked = OriginLock<[String]>([])
        init(_ answers: [String: [IPAddress]]) { self.answers = answers }
        func resolve(_ host: String, port: Int, done: @escaping @Sendable ([IPAddress]) -> Void) {
            asked.withLock { $0.append(host) }
            let found = answers[host] ?? []
            DispatchQueue.global().async { done(found) }
        }
        var questions: [String] { asked.withLock { $0 } }
    }

    @Test(arguments: SSRFGuardLiveTests.loopbackSpellings)
    func everyLoopbackSpellingIsForbiddenByDefault(host: String) async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 1000, port: 443)
        defer { origin.stop() }
        let engine = try Self.engine(squid)
        let result = try await SSRFGuardLiveTests.outcome(engine, "http://\(host):443/file")
        if host == "localhost" {
            // A name: resolved and vetted here, refused before the proxy hears of it.
            #expect(result == .failed(code: "destination_forbidden", message: "destination forbidden: 127.0.0.1 is loopback"))
        } else {
            guard case .refused(let code, _) = result else { Issue.record("\(host): \(result)"); return }
            #expect(code == "destination_forbidden")
        }
        #expect(origin.connectionCount == 0)
        #expect(squid.tunnels.isEmpty)
        await engine.shutdown()
    }

    @Test(arguments: SSRFGuardLiveTests.loopbackSpellings)
    func theTransfersOwnCheckRefusesEverySpellingBeforeTheProxy(host: String) async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 1000, port: 443)
        defer { origin.stop() }
        let driver = CurlTransferDriver(proxy: try UpstreamProxy.parse(squid.url).get())
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test("http://\(host):443/file", allowPrivateNetworks: false), delegate: recorder)
        guard case .failure(let failure) = try await recorder.outcome(timeout: 20) else {
            Issue.record("\(host) was fetched")
            return
        }
        #expect(failure.kind == .blockedAddress, "\(host): \(failure)")
        #expect(failure.message.hasPrefix("destination forbidden: "), "\(failure.message)")
        #expect(origin.connectionCount == 0)
        #expect(squid.tunnels.isEmpty)
    }

    @Test(arguments: SSRFGuardLiveTests.reachingSpellings)
    func everySpellingIsFetchedWhenPrivateNetworksAreAllowedAndTunnelledToTheAddress(host: String) async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 5000, port: 443)
        defer { origin.stop() }
        let engine = try Self.engine(squid) { $0.allowPrivateNetworks = true }
        let result = try await SSRFGuardLiveTests.outcome(engine, "http://\(host):443/file")
        #expect(result == .completed, "\(host)")
        #expect(origin.getCount() == 1)
        // CONNECT names the vetted address (Squid logs the IPv4-mapped one as IPv4), never the spelling.
        let expected = host == "0.0.0.0" ? "0.0.0.0:443" : "127.0.0.1:443"
        let tunnels = try await squid.waitForTunnels(1)
        #expect(tunnels.map(\.target) == [expected], "\(host): \(squid.accessLog)")
        await engine.shutdown()
    }

    @Test func anAllowListedLoopbackOriginIsFetchedAndNothingElse() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 4000, port: 443)
        defer { origin.stop() }
        let engine = try Self.engine(squid) { $0.allowHosts = ["localhost:443"] }
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://localhost:443/file") == .completed)
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://127.0.0.1:443/file")
                == .refused(code: "destination_forbidden", message: "127.0.0.1 port 443 is not on the allow list"))
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://localhost:444/file")
                == .refused(code: "destination_forbidden", message: "localhost port 444 is not on the allow list"))
        #expect(origin.getCount() == 1)
        await engine.shutdown()

        let byNetwork = try Self.engine(squid) { $0.allowHosts = ["127.0.0.0/8"] }
        #expect(try await SSRFGuardLiveTests.outcome(byNetwork, "http://0x7f000001:443/file") == .completed)
        #expect(try await SSRFGuardLiveTests.outcome(byNetwork, "http://localhost:443/file") == .completed)
        await byNetwork.shutdown()
        #expect(try await squid.waitForTunnels(3).map(\.target) == ["127.0.0.1:443", "127.0.0.1:443", "127.0.0.1:443"])
    }

    @Test func aRedirectToALoopbackAddressThatIsNotAllowedIsRefused() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let allowed = try TestOrigin(bodySize: 1000, port: 443)
        defer { allowed.stop() }
        let other = try TestOrigin(bodySize: 1000, address: "127.0.0.2", port: 443)
        defer { other.stop() }
        allowed.redirect(from: "/go", to: "http://127.0.0.2:443/file")
        let engine = try Self.engine(squid) { $0.allowHosts = ["127.0.0.1:443", "localhost:443"] }
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://127.0.0.1:443/go")
                == .failed(code: "destination_forbidden", message: "destination forbidden: 127.0.0.2 port 443 is not on the allow list"))
        #expect(allowed.getCount(path: "/go") == 1)
        #expect(other.connectionCount == 0)
        await engine.shutdown()
        #expect(try await squid.waitForTunnels(1).map(\.target) == ["127.0.0.1:443"])
    }

    @Test func aHostRefusedByNameIsNotEvenResolved() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let resolver = TableResolver(["localhost": [IPAddress("127.0.0.1")!]])
        let rules = try EgressRules(allowPrivateNetworks: false, allow: ["localhost:444"], deny: [])
        let driver = CurlTransferDriver(egress: rules, proxy: try UpstreamProxy.parse(squid.url).get(), resolver: resolver)
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test("http://localhost:443/file", allowPrivateNetworks: false), delegate: recorder)
        guard case .failure(let failure) = try await recorder.outcome() else {
            Issue.record("fetched a host that is not on the allow list")
            return
        }
        #expect(failure.kind == .blockedAddress)
        #expect(failure.message == "destination forbidden: localhost port 443 is not on the allow list")
        #expect(resolver.questions.isEmpty)
        #expect(squid.tunnels.isEmpty)
    }

    @Test func aNameThatResolvesToAForbiddenAddressNeverReachesTheProxy() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 1000, port: 443)
        defer { origin.stop() }
        // A rebinding name: first a documentation address, then loopback. Every address is vetted.
        let resolver = TableResolver(["rebind.test": [IPAddress("192.0.2.1")!, IPAddress("127.0.0.1")!]])
        let driver = CurlTransferDriver(proxy: try UpstreamProxy.parse(squid.url).get(), resolver: resolver)
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test("http://rebind.test:443/file", allowPrivateNetworks: false), delegate: recorder)
        guard case .failure(let failure) = try await recorder.outcome() else { Issue.record("fetched"); return }
        #expect(failure.kind == .blockedAddress)
        #expect(failure.message == "destination forbidden: 192.0.2.1 is documentation")
        #expect(resolver.questions == ["rebind.test"])
        #expect(origin.connectionCount == 0)
        #expect(squid.tunnels.isEmpty)
    }

    /// A name with several addresses: when the proxy cannot reach the first (refused there), the
    /// tunnel goes on to the next vetted one, as a direct connection goes on to a host's next
    /// address; when none answers, the attempt fails once all were tried.
    @Test func theTunnelFallsBackToTheNextVettedAddress() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 3000, port: 443)  // on 127.0.0.1 only
        defer { origin.stop() }
        let resolver = TableResolver(["two.test": [IPAddress("127.0.0.3")!, IPAddress("127.0.0.1")!],
                                      "none.test": [IPAddress("127.0.0.3")!, IPAddress("127.0.0.4")!]])
        let driver = CurlTransferDriver(proxy: try UpstreamProxy.parse(squid.url).get(), resolver: resolver)
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test("http://two.test:443/file"), delegate: recorder)
        let summary = try await recorder.outcome(timeout: 20).get()
        #expect(summary.head.status == 200)
        #expect(recorder.sink.bytes == origin.expectedBody())
        #expect(recorder.heads.count == 1)
        #expect(try await squid.waitForTunnels(2).map(\.target) == ["127.0.0.3:443", "127.0.0.1:443"])

        let none = TransferRecorder()
        _ = driver.start(.test("http://none.test:443/file"), delegate: none)
        guard case .failure(let failure) = try await none.outcome(timeout: 20) else { Issue.record("fetched"); return }
        #expect(failure.kind == .connection, "\(failure)")
        #expect(try await squid.waitForTunnels(4).map(\.target).suffix(2) == ["127.0.0.3:443", "127.0.0.4:443"])
        #expect(origin.getCount() == 1)
    }

    @Test func aRedirectToADeniedAddressIsRefused() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 1000, port: 443)
        defer { origin.stop() }
        let denied = try TestOrigin(bodySize: 1000, address: "127.0.0.2", port: 443)
        defer { denied.stop() }
        origin.redirect(from: "/go", to: "http://0x7f000002:443/file")
        let engine = try Self.engine(squid) {
            $0.allowPrivateNetworks = true
            $0.denyHosts = ["127.0.0.2:443"]
        }
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://127.0.0.1:443/go")
                == .failed(code: "destination_forbidden", message: "destination forbidden: 127.0.0.2 is denied (rule 127.0.0.2:443)"))
        #expect(denied.connectionCount == 0)
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://127.0.0.1:443/file") == .completed)
        await engine.shutdown()
        #expect(try await squid.waitForTunnels(2).map(\.target) == ["127.0.0.1:443", "127.0.0.1:443"])
    }

    @Test func aRedirectFromAnAllowedNameCannotReachLoopback() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 1000, port: 443)
        defer { origin.stop() }
        let target = try TestOrigin(bodySize: 1000, address: "127.0.0.2", port: 443)
        defer { target.stop() }
        origin.redirect(from: "/go", to: "http://[::ffff:127.0.0.2]:443/file")
        let engine = try Self.engine(squid) { $0.allowHosts = ["localhost:443", "*.example.com"] }
        #expect(try await SSRFGuardLiveTests.outcome(engine, "http://localhost:443/go")
                == .failed(code: "destination_forbidden", message: "destination forbidden: ::ffff:127.0.0.2 port 443 is not on the allow list"))
        #expect(target.connectionCount == 0)
        await engine.shutdown()
    }
}
