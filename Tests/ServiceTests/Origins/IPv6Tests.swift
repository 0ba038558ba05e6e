import Foundation
import Testing
@testable import DownloaderEngine

/// IPv6 origins (loopback `::1`, allowed with `allowPrivateNetworks`) by literal and by name, over
/// TLS too, and the service listening on `::` for IPv6 and IPv4 clients alike.
@Suite(.timeLimit(.minutes(2)))
struct IPv6Tests {
    @Test func anIPv6LiteralOrigin() async throws {
        let origin = try TestOrigin(bodySize: 200_000, address: "::1")
        defer { origin.stop() }
        #expect(origin.url.hasPrefix("http://[::1]:"))
        let engine = try EngineLiveTests.engine()
        let (_, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func anIPv6OriginByName() async throws {
        // localhost is ::1 and 127.0.0.1: the origin listens on ::1 only, and 127.0.0.1 at its port is
        // held, bound but not listening, so libcurl's IPv4 attempt is refused instead of reaching
        // another test's server that the kernel gave the same port number (CI saw its 404).
        let (origin, heldIPv4) = try Self.originOnIPv6Only(bodySize: 50_000)
        defer { origin.stop(); close(heldIPv4) }
        let engine = try EngineLiveTests.engine()
        let (_, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: "http://localhost:\(origin.port)/file"))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        #expect(origin.requests().first?.header("host") == "localhost:\(origin.port)")
        await engine.shutdown()
    }

    /// A `TestOrigin` on ::1 and a socket bound (without SO_REUSEADDR, not listening) to 127.0.0.1 at
    /// the same port, so that no IPv4 listener can take it while the test runs. Another origin is
    /// tried if that port is already taken on 127.0.0.1 (at most 20).
    static func originOnIPv6Only(bodySize: Int) throws -> (TestOrigin, Int32) {
        for _ in 0..<20 {
            let origin = try TestOrigin(bodySize: bodySize, address: "::1")
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd >= 0, OriginSocket.bind(fd, address: "127.0.0.1", port: origin.port) == 0 { return (origin, fd) }
            if fd >= 0 { close(fd) }
            origin.stop()
        }
        throw OriginError("no port free on both ::1 and 127.0.0.1 in 20 tries")
    }

    @Test func anIPv6OriginIsStillRefusedWithoutPrivateNetworks() async throws {
        let origin = try TestOrigin(bodySize: 1000, address: "::1")
        defer { origin.stop() }
        let engine = try SSRFGuardLiveTests.engine()
        let result = try await SSRFGuardLiveTests.outcome(engine, origin.url)
        #expect(result == .refused(code: "destination_forbidden", message: "::1 is loopback"))
        #expect(origin.connectionCount == 0)
        await engine.shutdown()
    }

    @Test func anHTTPSOriginOverIPv6() async throws {
        let certs = try TLSOriginTests.certificates.get()
        let body = EngineFixture.body(100_000, seed: 8)
        let nginx = try await onThread {
            try NginxOrigin(files: ["f.bin": body], tls: .init(certificate: certs.server.certificate, key: certs.server.key), ipv6: true)
        }
        defer { nginx.stop() }
        let engine = try TLSOriginTests.engine(caFile: certs.caFile)
        let (_, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: "https://[::1]:\(nginx.port)/f.bin"))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, done.id) == body)
        await engine.shutdown()
    }

    @Test func theServiceListensOnBothFamiliesWithHostColonColon() async throws {
        let service = try await ServiceProcess.start(arguments: ["--host", "::"])
        var v6 = service.client
        v6.host = "::1"
        #expect(try await service.client.request("GET", "/healthz").status == 200)
        #expect(try await v6.request("GET", "/healthz").status == 200)
        try await service.stop()
        let lines = service.logLines
        let listening = try #require(lines.first { $0.contains(#""msg":"listening""#) })
        #expect(listening.contains(#""url":"http://[::]:\#(service.port)""#), "\(listening)")
        let remotes = lines.filter { $0.contains(#""path":"/healthz""#) }.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["remote"] as? String
        }
        #expect(remotes.count == 2)
        #expect(remotes.first?.hasPrefix("127.0.0.1:") == true, "\(remotes)")  // IPv4 shown as IPv4, not ::ffff:127.0.0.1.
        #expect(remotes.last?.hasPrefix("[::1]:") == true, "\(remotes)")
    }
}
