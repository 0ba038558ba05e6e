import Foundation
import Glibc
import Synchronization
import Testing
@testable import MiniHTTPServer

/// Bulk loops (`ServerConfiguration.bulkLoopCount`, `BulkPolicy`): which responses move, and that a
/// moved response is served end to end on a bulk loop at its nice value, the connection coming back
/// to the answering loop for its next request. (The push-stream suites run with the default
/// configuration, one bulk loop, so their chunked bodies — backpressure, client disconnect, abort —
/// are all served by a bulk loop too; `defaultsMoveLongBodies` pins that.)
@Suite("HTTPServer bulk loops")
struct BulkLoopTests {
    typealias Shape = BulkPolicy.Shape

    @Test(arguments: [
        // shape, isHead, bulk loops, output queued, moves
        (Shape.inMemory, false, 1, false, false),
        (.closure, false, 1, false, false),
        (.push(length: nil), false, 1, false, true),
        (.push(length: nil), true, 1, false, false),
        (.push(length: nil), false, 0, false, false),
        (.push(length: nil), false, 1, true, false),
        (.push(length: 1 << 20), false, 2, false, true),
        (.push(length: (1 << 20) - 1), false, 1, false, false),
        (.file(bytes: 1 << 20), false, 1, false, true),
        (.file(bytes: 1 << 30), true, 1, false, false),
        (.file(bytes: 100), false, 1, false, false),
        (.file(bytes: 1 << 30), false, 0, false, false),
    ] as [(Shape, Bool, Int, Bool, Bool)])
    func whichResponsesMove(shape: Shape, isHead: Bool, bulkLoops: Int, queued: Bool, moves: Bool) {
        #expect(BulkPolicy.moves(shape, isHead: isHead, minimumBytes: 1 << 20, bulkLoops: bulkLoops,
                                 outputQueued: queued) == moves)
    }

    @Test func defaultsMoveLongBodies() {
        let c = ServerConfiguration()
        #expect(c.bulkLoopCount == 1 && c.bulkLoopNice == 10 && c.bulkMinimumBodyBytes == 1 << 20)
        #expect(c.loopThreadNice == 0)
    }

    /// Records the kernel thread each call ran on; writes `chunks` chunks (each after a wake), then
    /// finishes; sets an idle heartbeat when asked.
    final class ThreadRecordingSource: PushSource, @unchecked Sendable {
        private let lock = NSLock()
        private var threads: Set<Int32> = []
        private var stream: PushStream?
        private var pending: [[UInt8]] = []
        private var finishing = false
        private var aborting = false
        let heartbeat: [UInt8]?
        let attached = OneShot<Bool>()
        let ended = OneShot<Bool>()

        init(heartbeat: [UInt8]? = nil) { self.heartbeat = heartbeat }

        func feed(_ bytes: [UInt8], finish: Bool = false, abort: Bool = false) {
            let stream = lock.withLock { () -> PushStream? in
                pending.append(bytes)
                finishing = finishing || finish
                aborting = aborting || abort
                return self.stream
            }
            stream?.wake()
        }

        func produce(_ stream: PushStream) {
            let (first, work, finish, abort) = lock.withLock { () -> (Bool, [[UInt8]], Bool, Bool) in
                threads.insert(ThreadNice.currentThreadID)
                let first = self.stream == nil
                self.stream = stream
                defer { pending = [] }
                return (first, pending, finishing, aborting)
            }
            if first, let heartbeat { stream.setIdleHeartbeat(heartbeat, after: 0.05) }
            attached.set(true)
            for bytes in work { stream.write(bytes) }
            if abort { stream.abort() } else if finish { stream.finish() }
        }

        func ended(_ stream: PushStream, completed: Bool) {
            lock.withLock {
                threads.insert(ThreadNice.currentThreadID)
                self.stream = nil
            }
            ended.set(completed)
        }

        var threadsSeen: Set<Int32> { lock.withLock { threads } }
    }

    /// A server with one API loop and one bulk loop at nice `base + 3`; `/push` answers the given
    /// source, `/file` the given path, anything else the kernel thread id that answered it.
    static func withBulkServer(source: ThreadRecordingSource?, file: String? = nil, bulkLoops: Int = 1,
                               log: (@Sendable (AccessLogEntry) -> Void)? = nil, yield: BulkLoopYield? = nil,
                               _ body: @escaping @Sendable (Int, _ api: [Int32], _ bulk: [Int32], _ nice: Int) async throws -> Void) async throws {
        let nice = min(ThreadNice.current + 3, ThreadNice.maximum)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = 1
        configuration.bulkLoopCount = bulkLoops
        configuration.bulkLoopNice = nice
        configuration.shutdownGracePeriod = 2
        configuration.accessLog = log
        configuration.bulkLoopYield = yield
        let server = HTTPServer(configuration: configuration) { request in
            if request.path == "/push", let source { return Response(body: .push(PushBody(source: source))) }
            if request.path == "/file", let file { return Response(body: .file(FileResponse(path: file))) }
            return Response(body: .bytes(Array("\(ThreadNice.currentThreadID)".utf8)))
        }
        let port = try server.start()
        let api = server.eventLoopKernelThreadIDs, bulk = server.bulkLoopKernelThreadIDs
        do {
            try await withTimeout(30) { try await body(port, api, bulk, nice) }
            await server.shutdown()
        } catch {
            await server.shutdown()
            throw error
        }
    }

    @Test func aPushStreamIsServedByTheBulkLoopAndTheNextRequestByTheAPILoop() async throws {
        let source = ThreadRecordingSource(heartbeat: Array(": hb\n".utf8))
        try await Self.withBulkServer(source: source) { port, api, bulk, nice in
            #expect(api.count == 1 && bulk.count == 1 && api[0] != bulk[0])
            #expect(try LoopThreadNiceTests.niceOf(thread: bulk[0]) == nice)
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            #expect(try await client.readResponseHead().header("Transfer-Encoding") == "chunked")
            _ = try await source.attached.value()
            // Quiet for longer than the heartbeat interval: the bulk loop's timer writes it.
            #expect(try await client.readChunk() == Array(": hb\n".utf8))
            source.feed(Array("data".utf8))
            var chunk = try await client.readChunk()
            while chunk == Array(": hb\n".utf8) { chunk = try await client.readChunk() }
            #expect(chunk == Array("data".utf8))
            source.feed(Array("end".utf8), finish: true)
            chunk = try await client.readChunk()
            while chunk == Array(": hb\n".utf8) { chunk = try await client.readChunk() }
            #expect(chunk == Array("end".utf8))
            #expect(try await client.readChunk() == nil)
            #expect(try await source.ended.value() == true)
            #expect(source.threadsSeen == [bulk[0]])
            // Keep-alive: the same connection is back on the API loop.
            try await client.send(get("/who"))
            #expect(try await client.readResponse().bodyText == "\(api[0])")
        }
    }

    @Test func aPipelinedRequestBehindAMovedResponseIsAnsweredAtHome() async throws {
        let source = ThreadRecordingSource()
        try await Self.withBulkServer(source: source) { port, api, bulk, _ in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push") + get("/who"))
            _ = try await client.readResponseHead()
            _ = try await source.attached.value()
            source.feed(Array("x".utf8), finish: true)
            #expect(try await client.readChunk() == Array("x".utf8))
            #expect(try await client.readChunk() == nil)
            #expect(try await client.readResponse().bodyText == "\(api[0])")
            #expect(source.threadsSeen == [bulk[0]])
        }
    }

    @Test func theClientLeavingAMovedStreamEndsItsSourceOnTheBulkLoop() async throws {
        let source = ThreadRecordingSource()
        try await Self.withBulkServer(source: source) { port, _, bulk, _ in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            _ = try await client.readResponseHead()
            _ = try await source.attached.value()
            client.close()
            #expect(try await source.ended.value() == false)
            #expect(source.threadsSeen == [bulk[0]])
        }
    }

    @Test func anAbortedMovedStreamEndsWithoutItsLastChunk() async throws {
        let source = ThreadRecordingSource()
        try await Self.withBulkServer(source: source) { port, _, bulk, _ in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            _ = try await client.readResponseHead()
            _ = try await source.attached.value()
            source.feed(Array("part".utf8), abort: true)
            #expect(try await client.readChunk() == Array("part".utf8))
            // No final chunk: the connection closes mid-body.
            #expect(try await client.readsEndOfStream())
            #expect(try await source.ended.value() == false)
            #expect(source.threadsSeen == [bulk[0]])
        }
    }

    @Test func withoutBulkLoopsTheAnsweringLoopServesTheStream() async throws {
        let source = ThreadRecordingSource()
        try await Self.withBulkServer(source: source, bulkLoops: 0) { port, api, bulk, _ in
            #expect(bulk.isEmpty)
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            _ = try await client.readResponseHead()
            _ = try await source.attached.value()
            source.feed([1], finish: true)
            #expect(try await client.readChunk() == [1])
            #expect(try await client.readChunk() == nil)
            #expect(source.threadsSeen == [api[0]])
        }
    }

    @Test(arguments: [(3 << 20, true), (1000, false)])
    func aLargeFileMovesASmallOneStays(size: Int, moves: Bool) async throws {
        let dir = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("f").path
        let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(content)))
        // The access log is written by the loop that finished the response: it names that thread.
        let logged = Mutex<[(path: String, bytes: Int64, thread: Int32)]>([])
        let log: @Sendable (AccessLogEntry) -> Void = { entry in
            logged.withLock { $0.append((entry.path, entry.bytes, ThreadNice.currentThreadID)) }
        }
        try await Self.withBulkServer(source: nil, file: path, log: log) { port, api, bulk, _ in
            let client = try await RawHTTPClient.connect(port: port, receiveBuffer: 16 << 10)
            try await client.send(get("/file"))
            let response = try await client.readResponse()
            #expect(response.status == 200 && response.body == content)
            try await client.send(get("/who"))
            #expect(try await client.readResponse().bodyText == "\(api[0])")
            let deadline = Date().addingTimeInterval(10)
            while logged.withLock({ $0.count }) < 2, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
            let entries = logged.withLock { $0 }
            #expect(entries.map(\.path) == ["/file", "/who"])
            #expect(entries.first?.bytes == Int64(size))
            #expect(entries.first?.thread == (moves ? bulk[0] : api[0]))
            #expect(entries.last?.thread == api[0])
        }
    }
}
