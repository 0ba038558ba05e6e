import Foundation
import Testing
@testable import DownloaderEngine

/// Fetching through a real Squid with its default configuration (CONNECT to port 443 only), inside a
/// loopback-only network namespace (run by `LoopbackNamespaceRunTests`). Origins listen on port 443
/// of loopback addresses, as the default configuration wants.
@Suite(.serialized, .enabled(if: LoopbackNamespace.isInside), .timeLimit(.minutes(3)))
struct ProxiedFetchTests {
    static let certificates = Result { try TestCertificates() }

    static func engine(proxy: String, caFile: String? = nil, _ configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = EngineFixture.configuration(EngineFixture.root())
        c.upstreamProxy = proxy
        c.caFile = caFile
        configure(&c)
        return try DownloadEngine(configuration: c)
    }

    static func fetch(_ engine: DownloadEngine, _ url: String) async throws -> DownloadSnapshot {
        try await EngineLiveTests.fetch(engine, DownloadRequest(url: url)).1
    }

    @Test func anHTTPOriginIsTunnelledToItsVettedAddressAndKeepsItsHost() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 300_000, port: 443)
        defer { origin.stop() }
        let engine = try Self.engine(proxy: squid.url)
        let done = try await Self.fetch(engine, "http://localhost:443/file")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        #expect(origin.requests(path: "/file").first?.header("host") == "localhost:443")
        let tunnels = try await squid.waitForTunnels(1)
        #expect(tunnels.map(\.target) == ["127.0.0.1:443"], "\(squid.accessLog)")
        #expect(tunnels.first?.result == "TCP_TUNNEL/200")
        await engine.shutdown()
    }

    @Test func anHTTPSOriginSpeaksHTTP2ThroughTheTunnelAndIsVerifiedByItsName() async throws {
        let certs = try Self.certificates.get()
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let body = EngineFixture.body(500_000, seed: 4)
        let nginx = try await onThread {
            // Names localhost only: a check against the vetted address (127.0.0.1) would fail.
            try NginxOrigin(files: ["f.bin": body], tls: .init(certificate: certs.nameOnly.certificate, key: certs.nameOnly.key), port: 443)
        }
        defer { nginx.stop() }
        let engine = try Self.engine(proxy: squid.url, caFile: certs.caFile)
        let done = try await Self.fetch(engine, "https://localhost/f.bin")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == body)
        #expect(nginx.accessLog().last?[4] == "HTTP/2.0")
        await engine.shutdown()  // Closes the HTTP/2 connection: Squid logs a tunnel when it ends.
        #expect(try await squid.waitForTunnels(1).map(\.target) == ["127.0.0.1:443"])

        // The certificate is checked against the URL's name, never the vetted address: one for
        // 127.0.0.1 alone does not do for https://localhost/.
        nginx.stop()
        let checking = try Self.engine(proxy: squid.url, caFile: certs.caFile)
        let byAddress = try await onThread {
            try NginxOrigin(files: ["f.bin": body], tls: .init(certificate: certs.addressOnly.certificate, key: certs.addressOnly.key),
                            port: 443)
        }
        defer { byAddress.stop() }
        let refused = try await Self.fetch(checking, "https://localhost/f.bin")
        #expect(refused.error?.code == .tlsCertificate, "\(String(describing: refused.error))")
        await checking.shutdown()
    }

    @Test func anHTTPSProxyIsVerifiedWithTheCAFileToo() async throws {
        let certs = try Self.certificates.get()
        let squid = try await onThread { try SquidProxy(tls: certs.server) }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 100_000, port: 443)
        defer { origin.stop() }
        let proxyURL = try #require(squid.httpsURL)
        let trusting = try Self.engine(proxy: proxyURL, caFile: certs.caFile)
        let done = try await Self.fetch(trusting, "http://localhost:443/file")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        await trusting.shutdown()

        let untrusting = try Self.engine(proxy: proxyURL)
        let failed = try await Self.fetch(untrusting, "http://localhost:443/file")
        #expect(failed.error?.code == .tlsCertificate, "\(String(describing: failed.error))")
        #expect(failed.error?.message.contains("the upstream proxy localhost") == true, "\(String(describing: failed.error))")
        #expect(untrusting.statistics.retries == 0)
        await untrusting.shutdown()
    }

    @Test func credentialsGoAsBasicAndA407FailsAtOnceWithoutShowingThem() async throws {
        let squid = try await onThread { try SquidProxy(credentials: ("fetcher", "s3cret-pw")) }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 10_000, port: 443)
        defer { origin.stop() }
        let proxied = squid.url.replacingOccurrences(of: "http://", with: "http://fetcher:s3cret-pw@")
        let engine = try Self.engine(proxy: proxied)
        let done = try await Self.fetch(engine, "http://localhost:443/file")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        await engine.shutdown()

        for proxy in [squid.url, squid.url.replacingOccurrences(of: "http://", with: "http://fetcher:wrong-pw@")] {
            let refused = try Self.engine(proxy: proxy)
            let failed = try await Self.fetch(refused, "http://localhost:443/file")
            #expect(failed.error?.code == .proxyAuth, "\(String(describing: failed.error))")
            #expect(failed.error?.message.contains("407") == true)
            #expect(failed.error?.message.contains("pw") == false)
            #expect(refused.statistics.retries == 0)
            await refused.shutdown()
        }
        #expect(origin.getCount() == 1)
    }

    @Test func squidsDefaultConfigurationRefusesATunnelToAnotherPort() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let engine = try Self.engine(proxy: squid.url)
        let failed = try await Self.fetch(engine, origin.url)
        #expect(failed.error?.code == .proxyRefused, "\(String(describing: failed.error))")
        #expect(failed.error?.message.contains("HTTP 403") == true)
        #expect(engine.statistics.retries == 0)
        #expect(origin.connectionCount == 0)
        await engine.shutdown()
    }

    @Test func noProxyHostsGoDirectAndEachHopIsRoutedOnItsOwn() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let direct = try TestOrigin(bodySize: 1000)  // Any port: never through the proxy.
        defer { direct.stop() }
        let proxied = try TestOrigin(bodySize: 2000, port: 443)
        defer { proxied.stop() }
        direct.redirect(from: "/away", to: "http://localhost:443/file")
        let engine = try Self.engine(proxy: squid.url) { $0.noProxy = ["127.0.0.1"] }
        let first = try await Self.fetch(engine, direct.url)
        #expect(first.state == .completed)
        #expect(squid.tunnels.isEmpty)
        let second = try await Self.fetch(engine, direct.url("/away"))
        #expect(second.state == .completed, "\(String(describing: second.error))")
        #expect(try EngineLiveTests.stored(engine, second.id) == proxied.expectedBody())
        #expect(try await squid.waitForTunnels(1).map(\.target) == ["127.0.0.1:443"])
        await engine.shutdown()
    }

    @Test func redirectsAreFollowedHopByHopThroughTheProxy() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 5000, port: 443)
        defer { origin.stop() }
        origin.redirect(from: "/a", to: "/b")
        origin.redirect(from: "/b", to: "/file")
        origin.redirect(from: "/loop", to: "/loop")
        origin.redirect(from: "/ftp", to: "ftp://localhost/file")
        let engine = try Self.engine(proxy: squid.url) { $0.maxRedirects = 4 }
        let done = try await Self.fetch(engine, "http://localhost:443/a")
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        #expect(origin.requests().map(\.path) == ["/a", "/b", "/file"])
        let loop = try await Self.fetch(engine, "http://localhost:443/loop")
        #expect(loop.error?.code == .tooManyRedirects, "\(String(describing: loop.error))")
        #expect(origin.getCount(path: "/loop") == 5)
        let ftp = try await Self.fetch(engine, "http://localhost:443/ftp")
        #expect(ftp.error?.code == .unsupportedRedirect, "\(String(describing: ftp.error))")
        await engine.shutdown()
    }

    @Test func aCutIsResumedThroughTheProxy() async throws {
        let squid = try await onThread { try SquidProxy() }
        defer { squid.stop() }
        let origin = try TestOrigin(bodySize: 400_000, port: 443)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 150_000))
        let engine = try Self.engine(proxy: squid.url)
        let done = try await Self.fetch(engine, "http://localhost:443/file")
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        #expect(origin.requests(path: "/file").map { $0.header("range") } == [nil, "bytes=150000-"])
        await engine.shutdown()
    }
}
