@testable import DownloaderEngine
import Foundation
import Testing

/// The SSRF guard live, through the engine built as the service builds it (`DownloadEngine(configuration:)`,
/// so the libcurl driver carries the configured rules) and through the driver alone (the connect-time
/// check without the engine's pre-check). Every URL here names this machine's loopback: the origins
/// listen on 127.0.0.1 and nothing is ever sent elsewhere.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SSRFGuardLiveTests {
    /// Loopback spelled the ways an attacker would try.
    static let loopbackSpellings = ["127.0.0.1", "localhost", "0x7f000001", "2130706433", "0177.0.0.1", "127.1",
                                    "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0"]
    /// The spellings that reach a listener on 127.0.0.1 (`[::1]` is IPv6 loopback, where the origin is not).
    static let reachingSpellings = loopbackSpellings.filter { $0 != "[::1]" }

    static func engine(_ configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = EngineConfiguration(root: EngineFixture.root())
        c.maxAttempts = 2
        c.retryBaseDelay = 0.01
        c.retryMaxDelay = 0.05
        c.connectTimeout = 5
        configure(&c)
        return try DownloadEngine(configuration: c)
    }

    /// How asking for `url` ended: refused at once, or the download's end state.
    enum Outcome: Equatable {
        case refused(code: String, message: String)
        case completed
        case failed(code: String, message: String)
    }

    static func outcome(_ engine: DownloadEngine, _ url: String) async throws -> Outcome {
        let enqueued: Enqueued
        do {
            enqueued = try engine.request(DownloadRequest(url: url))
        } catch {
            return .refused(code: error.code.rawValue, message: error.message)
        }
        let end = try await withTimeout(30) {
            try await EngineFixture.waitFor(engine, id: enqueued.snapshot.id, [.completed, .failed])
        }
        if end.state == .completed { return .completed }
        return .failed(code: end.error?.code.rawValue ?? "-", message: end.error?.message ?? "-")
    }

    @Test(arguments: loopbackSpellings)
    func everyLoopbackSpellingIsForbiddenByDefault(host: String) async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let engine = try Self.engine()
        let result = try await Self.outcome(engine, "http://\(host):\(origin.port)/file")
        let expectedReason = host == "0.0.0.0" ? "0.0.0.0 is unspecified"
            : host == "[::1]" ? "::1 is loopback"
            : host == "[::ffff:127.0.0.1]" ? "::ffff:127.0.0.1 is loopback" : "127.0.0.1 is loopback"
        if host == "localhost" {
            // A name that resolves to loopback: only the connect-time check can see it.
            guard case .failed(let code, let message) = result else {
                Issue.record("localhost: \(result)")
                return
            }
            #expect(code == "destination_forbidden")
            #expect(message.contains("is loopback"), "\(message)")
        } else {
            // An address literal in a denied range: refused before anything is fetched (HTTP 403).
            #expect(result == .refused(code: "destination_forbidden", message: expectedReason))
        }
        #expect(origin.connectionCount == 0)
        await engine.shutdown()
    }

    @Test(arguments: loopbackSpellings)
    func theConnectTimeCheckAloneRefusesEverySpelling(host: String) async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let driver = CurlTransferDriver(egress: EgressRules())
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test("http://\(host):\(origin.port)/file", allowPrivateNetworks: false), delegate: recorder)
        let outcome = try await recorder.outcome(timeout: 20)
        guard case .failure(let failure) = outcome else {
            Issue.record("\(host) was fetched")
            return
        }
        #expect(failure.kind == .blockedAddress, "\(host): \(failure)")
        #expect(failure.message.hasPrefix("destination forbidden: "), "\(failure.message)")
        #expect(RetryPolicy.classify(failure.kind) == .fail(code: .destinationForbidden))
        #expect(recorder.heads.isEmpty)
        #expect(origin.connectionCount == 0)
    }

    @Test(arguments: reachingSpellings)
    func everySpellingIsFetchedWhenPrivateNetworksAreAllowed(host: String) async throws {
        let origin = try TestOrigin(bodySize: 5000)
        defer { origin.stop() }
        let engine = try Self.engine { $0.allowPrivateNetworks = true }
        let result = try await Self.outcome(engine, "http://\(host):\(origin.port)/file")
        #expect(result == .completed, "\(host)")
        #expect(origin.getCount() == 1)
        await engine.shutdown()
    }

    @Test func anAllowListedLoopbackOriginIsFetchedAndNothingElse() async throws {
        let origin = try TestOrigin(bodySize: 4000)
        defer { origin.stop() }
        let engine = try Self.engine { $0.allowHosts = ["localhost:\(origin.port)"] }
        #expect(try await Self.outcome(engine, "http://localhost:\(origin.port)/file") == .completed)
        #expect(try await Self.outcome(engine, "http://127.0.0.1:\(origin.port)/file")
                == .refused(code: "destination_forbidden", message: "127.0.0.1 port \(origin.port) is not on the allow list"))
        let otherPort = origin.port == 65535 ? 65534 : origin.port + 1
        #expect(try await Self.outcome(engine, "http://localhost:\(otherPort)/file")
                == .refused(code: "destination_forbidden", message: "localhost port \(otherPort) is not on the allow list"))
        #expect(origin.getCount() == 1)
        await engine.shutdown()

        // A network entry allows every spelling of its addresses, and lifts the range ban for them.
        let byNetwork = try Self.engine { $0.allowHosts = ["127.0.0.0/8"] }
        #expect(try await Self.outcome(byNetwork, "http://0x7f000001:\(origin.port)/file") == .completed)
        #expect(try await Self.outcome(byNetwork, "http://localhost:\(origin.port)/file") == .completed)
        await byNetwork.shutdown()
    }

    @Test func aRedirectToALoopbackPortThatIsNotAllowedIsRefused() async throws {
        let allowed = try TestOrigin(bodySize: 1000)
        defer { allowed.stop() }
        let other = try TestOrigin(bodySize: 1000)
        defer { other.stop() }
        allowed.redirect(from: "/go", to: "http://127.0.0.1:\(other.port)/file")
        allowed.redirect(from: "/by-name", to: "http://localhost:\(other.port)/file")
        let engine = try Self.engine { $0.allowHosts = ["127.0.0.1:\(allowed.port)", "localhost:\(allowed.port)"] }

        #expect(try await Self.outcome(engine, "http://127.0.0.1:\(allowed.port)/go")
                == .failed(code: "destination_forbidden",
                           message: "destination forbidden: 127.0.0.1 port \(other.port) is not on the allow list"))
        // localhost resolves to 127.0.0.1 and ::1; whichever libcurl tried last is named.
        let byName = try await Self.outcome(engine, "http://localhost:\(allowed.port)/by-name")
        let expected = ["127.0.0.1", "::1"].map {
            Outcome.failed(code: "destination_forbidden",
                           message: "destination forbidden: localhost (\($0)) port \(other.port) is not on the allow list")
        }
        #expect(expected.contains(byName), "\(byName)")
        #expect(allowed.getCount(path: "/go") == 1)
        #expect(allowed.getCount(path: "/by-name") == 1)
        #expect(other.connectionCount == 0)
        await engine.shutdown()
    }

    @Test func aHostRefusedByNameIsNotEvenResolved() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let otherPort = origin.port == 65535 ? 65534 : origin.port + 1
        let rules = try EgressRules(allowPrivateNetworks: false, allow: ["localhost:\(otherPort)"], deny: [])
        let driver = CurlTransferDriver(egress: rules)
        defer { driver.shutdown() }
        let recorder = TransferRecorder()
        _ = driver.start(.test("http://localhost:\(origin.port)/file", allowPrivateNetworks: false), delegate: recorder)
        guard case .failure(let failure) = try await recorder.outcome() else {
            Issue.record("fetched a host that is not on the allow list")
            return
        }
        // The name-only reason (no address in it): refused before the lookup, not after it.
        #expect(failure.kind == .blockedAddress)
        #expect(failure.message == "destination forbidden: localhost port \(origin.port) is not on the allow list")
        #expect(origin.connectionCount == 0)
    }

    @Test func aRedirectToADeniedAddressIsRefused() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let denied = try TestOrigin(bodySize: 1000)
        defer { denied.stop() }
        origin.redirect(from: "/go", to: "http://0x7f000001:\(denied.port)/file")
        let engine = try Self.engine {
            $0.allowPrivateNetworks = true
            $0.denyHosts = ["127.0.0.1:\(denied.port)"]
        }
        #expect(try await Self.outcome(engine, "http://127.0.0.1:\(origin.port)/go")
                == .failed(code: "destination_forbidden",
                           message: "destination forbidden: 127.0.0.1 is denied (rule 127.0.0.1:\(denied.port))"))
        #expect(denied.connectionCount == 0)
        // The origin itself is fine.
        #expect(try await Self.outcome(engine, origin.url) == .completed)
        await engine.shutdown()
    }

    @Test func aRedirectFromAPublicNameCannotReachLoopback() async throws {
        // Without any rule, a redirect to a loopback literal is refused at connect time. The first
        // hop must itself be loopback here, so it is let through by a name rule only.
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let target = try TestOrigin(bodySize: 1000)
        defer { target.stop() }
        origin.redirect(from: "/go", to: "http://[::ffff:127.0.0.1]:\(target.port)/file")
        let engine = try Self.engine { $0.allowHosts = ["localhost:\(origin.port)", "*.example.com"] }
        let result = try await Self.outcome(engine, "http://localhost:\(origin.port)/go")
        #expect(result == .failed(code: "destination_forbidden",
                                  message: "destination forbidden: ::ffff:127.0.0.1 port \(target.port) is not on the allow list"))
        #expect(target.connectionCount == 0)
        await engine.shutdown()
    }
}
