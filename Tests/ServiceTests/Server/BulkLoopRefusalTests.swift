import Foundation
import Testing
@testable import MiniHTTPServer

/// A connection handed to a loop that was asked to stop (the server shutting down, the gate not yet
/// closed when the move was decided) is refused by that loop (`EventLoop.executeIfRunning`) and
/// kept by the loop that gave it up, on its own thread: served there, not run inline on the wrong
/// thread against the stopped loop's state (where it was closed unanswered). Each loop is stopped
/// here on its own, as at shutdown, so the ordering is deterministic.
@Suite("HTTPServer bulk loop refusal")
struct BulkLoopRefusalTests {
    typealias Source = BulkLoopTests.ThreadRecordingSource

    @Test func aResponseForAStoppedBulkLoopIsServedAtHome() async throws {
        let source = Source()
        try await Self.withServer(source: source) { server, port, api, _ in
            let bulkLoop = try #require(server.loops(bulk: true).first)
            await EventLoopRefusalTests.stop(bulkLoop)
            let client = try await RawHTTPClient.connect(port: port)
            defer { client.close() }
            try await client.send(get("/push"))
            #expect(try await client.readResponseHead().status == 200)
            _ = try await source.attached.value()
            source.feed(Array("x".utf8), finish: true)
            #expect(try await client.readChunk() == Array("x".utf8))
            #expect(try await client.readChunk() == nil)
            #expect(try await source.ended.value() == true)
            #expect(source.threadsSeen == [api[0]])
            // The connection stayed with the answering loop: its next request is answered there.
            try await client.send(get("/who"))
            #expect(try await client.readResponse().bodyText == "\(api[0])")
        }
    }

    @Test func aConnectionWhoseHomeLoopStoppedStaysOnTheBulkLoop() async throws {
        let source = Source()
        try await Self.withServer(source: source) { server, port, api, bulk in
            let client = try await RawHTTPClient.connect(port: port)
            defer { client.close() }
            try await client.send(get("/push"))
            #expect(try await client.readResponseHead().status == 200)
            _ = try await source.attached.value()
            let apiLoop = try #require(server.loops(bulk: false).first)
            await EventLoopRefusalTests.stop(apiLoop)
            source.feed(Array("x".utf8), finish: true)
            #expect(try await client.readChunk() == Array("x".utf8))
            #expect(try await client.readChunk() == nil)
            #expect(source.threadsSeen == [bulk[0]])
            // Home refused it: the bulk loop kept the connection and answers its next request.
            try await client.send(get("/who"))
            #expect(try await client.readResponse().bodyText == "\(bulk[0])")
            #expect(api[0] != bulk[0])
        }
    }

    /// One API loop and one bulk loop; `/push` answers `source`, anything else the kernel thread
    /// id that answered it. The server is shut down within a bound too (a stopped loop's `stop`
    /// must still complete).
    static func withServer(source: Source,
                           _ body: @escaping @Sendable (HTTPServer, Int, _ api: [Int32], _ bulk: [Int32]) async throws -> Void) async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = 1
        configuration.bulkLoopCount = 1
        configuration.shutdownGracePeriod = 2
        let server = HTTPServer(configuration: configuration) { request in
            if request.path == "/push" { return Response(body: .push(PushBody(source: source))) }
            return Response(body: .bytes(Array("\(ThreadNice.currentThreadID)".utf8)))
        }
        let port = try server.start()
        let api = server.eventLoopKernelThreadIDs, bulk = server.bulkLoopKernelThreadIDs
        do {
            try await withTimeout(30) { try await body(server, port, api, bulk) }
        } catch {
            try await withTimeout(30) { await server.shutdown() }
            throw error
        }
        try await withTimeout(30) { await server.shutdown() }
    }
}
