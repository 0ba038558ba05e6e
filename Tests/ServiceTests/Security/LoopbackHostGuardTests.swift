import Foundation
import MiniHTTPServer
import Testing
@testable import DownloadService

/// On loopback without a token, only requests naming this machine are answered (DNS rebinding).
@Suite struct LoopbackHostGuardTests {
    @Test(arguments: [
        ("127.0.0.1:8080", true), ("127.0.0.1", true), ("[::1]:8080", true), ("::1", true), ("LOCALHOST:8080", true),
        ("localhost.", true), ("app.localhost:3000", true), ("10.1.2.3:8080", true),
        ("evil.example:8080", false), ("evil.example", false), ("localhost.evil.example", false), ("[::1", false),
        ("127.0.0.1.nip.io:8080", false), ("", false), ("t", true), ("download-service:8080", true), ("a:b:c", false),
    ])
    func hosts(host: String, allowed: Bool) {
        #expect(LoopbackHostGuard.allows(host: host) == allowed)
        var headers = HTTPHeaders()
        headers.add("Host", host)
        let refusal = LoopbackHostGuard.refusal(headers: headers)
        #expect((refusal == nil) == allowed)
        #expect(refusal.map { $0.status == 421 && $0.code == "misdirected" } ?? true)
    }

    @Test func aRequestWithoutHostPasses() {
        #expect(LoopbackHostGuard.refusal(headers: HTTPHeaders()) == nil)
    }

    static func status(_ service: ServiceProcess, host: String) async throws -> Int {
        let connection = try await RawHTTPClient.connect(port: service.port)
        try await connection.send("GET /downloads HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
        return try await connection.readResponseHead().status
    }

    /// Through the service: refused on loopback without a token; with a token, the token decides.
    @Test func theServiceAnswersOnlyItsOwnNamesWhenOpenOnLoopback() async throws {
        let open = try await ServiceProcess.start()
        #expect(try await Self.status(open, host: "evil.example:\(open.port)") == 421)
        #expect(try await Self.status(open, host: "localhost:\(open.port)") == 200)
        #expect(try await open.stop() == 0)
        // An operator token alone leaves the caller routes open: still guarded.
        let adminOnly = try await ServiceProcess.start(arguments: ["--admin-token", "a-\(UUID().uuidString)"])
        #expect(try await Self.status(adminOnly, host: "evil.example:\(adminOnly.port)") == 421)
        #expect(try await Self.status(adminOnly, host: "localhost:\(adminOnly.port)") == 200)
        #expect(try await adminOnly.stop() == 0)
        let guarded = try await ServiceProcess.start(arguments: ["--auth-token", "t-\(UUID().uuidString)"])
        #expect(try await Self.status(guarded, host: "evil.example:\(guarded.port)") == 401)
        #expect(try await guarded.stop() == 0)
    }
}
