@testable import DownloadService
import Foundation
import Testing
@testable import MiniHTTPServer

/// The smuggling and malformed-request corpus (`HostileRequestCorpus`) against a live
/// `MiniHTTPServer` on 127.0.0.1 with the service's error renderer (`ServerErrorJSON`), one server
/// per case: every rejected request gets its 4xx/505 as a JSON error, the connection closes, and
/// the server still answers a fresh connection afterwards.
@Suite("Hostile requests: smuggling and malformed corpus", .timeLimit(.minutes(2)))
struct SmugglingCorpusTests {
    /// Echoes what the server made of each request: "METHOD path body".
    static let echo: HTTPHandler = { request in
        Response(body: .bytes(Array("\(request.method) \(request.path) ".utf8) + request.body))
    }

    /// One loop; a short header timeout only where a head never ends (bare LF: 408), so that a
    /// starved test process still sends every other request in time.
    static func configure(for hostile: HostileRequestCorpus.Case) -> @Sendable (inout ServerConfiguration) -> Void {
        let timeout: Double = hostile.status == 408 ? 2 : 10
        return { c in
            c.eventLoopCount = 1
            c.headerTimeout = timeout
            c.errorRenderer = ServerErrorJSON.response
        }
    }

    @Test(arguments: HostileRequestCorpus.rejected)
    func rejectedWithJSONErrorAndClose(_ hostile: HostileRequestCorpus.Case) async throws {
        try await withServer(configure: Self.configure(for: hostile), handler: Self.echo) { port in
            let client = try await RawHTTPClient.connect(port: port)
            defer { client.close() }
            // The server may answer and stop reading before everything is sent; the answer still comes.
            try? await client.send(hostile.bytes)
            let response = try await client.readResponse()
            #expect(response.status == hostile.status, "\(response.status) \(response.bodyText)")
            #expect(response.header("Content-Type") == "application/json")
            #expect(response.header("Connection")?.lowercased() == "close")
            let error = response.json["error"] as? [String: Any]
            #expect(error?["code"] is String && error?["message"] is String, "body: \(response.bodyText)")
            #expect(try await client.readsEndOfStream(), "the connection stays open after \(response.status)")

            let fresh = try await RawHTTPClient.connect(port: port)
            defer { fresh.close() }
            try await fresh.send(get("/after"))
            let after = try await fresh.readResponse()
            #expect(after.status == 200 && after.bodyText == "GET /after ")
        }
    }

    @Test(arguments: HostileRequestCorpus.framed)
    func allowedObfuscationsAreFramedOneWay(_ framed: HostileRequestCorpus.Framed) async throws {
        try await withServer(configure: { $0.eventLoopCount = 1 }, handler: Self.echo) { port in
            let client = try await RawHTTPClient.connect(port: port)
            defer { client.close() }
            try await client.send(framed.bytes)
            var seen: [String] = []
            for _ in framed.expect {
                let response = try await client.readResponse()
                #expect(response.status == 200, "\(response.status) \(response.bodyText)")
                seen.append(response.bodyText)
            }
            #expect(seen == framed.expect)
            // Nothing else was queued behind them: the next answer is for the next request.
            try await client.send("GET /last HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            #expect(try await client.readResponse().bodyText == "GET /last ")
            #expect(try await client.readsEndOfStream())
        }
    }

    /// Many hostile requests at once on one server: every one is answered and closed, and the
    /// server keeps serving (no event-loop wedge, no crash). The default header timeout, and so
    /// without the 408 case (covered above), leaves a loaded machine time to send them all.
    @Test func wholeCorpusAtOnceAgainstOneServer() async throws {
        try await withServer(handler: Self.echo) { port in
            try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for hostile in HostileRequestCorpus.rejected where hostile.status != 408 {
                    group.addTask {
                        let client = try await RawHTTPClient.connect(port: port)
                        defer { client.close() }
                        try? await client.send(hostile.bytes)
                        let response = try await client.readResponse()
                        #expect(try await client.readsEndOfStream())
                        return (hostile.name, response.status)
                    }
                }
                for try await (name, status) in group {
                    let expected = HostileRequestCorpus.rejected.first { $0.name == name }?.status
                    #expect(status == expected, "\(name)")
                }
            }
            let fresh = try await RawHTTPClient.connect(port: port)
            defer { fresh.close() }
            try await fresh.send(get("/after"))
            #expect(try await fresh.readResponse().status == 200)
        }
    }
}
