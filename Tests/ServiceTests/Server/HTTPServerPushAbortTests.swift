import Foundation
import Glibc
import Synchronization
import Testing
@testable import MiniHTTPServer

/// Ending a push stream short of its length: `abortAfterQueued` lets a client that is behind get
/// every byte queued before the connection closes; `abort` closes at once, also while such bytes
/// are still waiting for the client.
@Suite("HTTPServer push streams ended short")
struct HTTPServerPushAbortTests {
    /// Queues `queued` bytes of `file` and asks for an abort after them on its first call; aborts at
    /// once on a later call when `abortNow` was set.
    final class ShortSource: PushSource, @unchecked Sendable {
        let file: ReadableFile
        let queued: Int64
        private let lock = NSLock()
        private var stream: PushStream?
        private var now = false
        let attached = OneShot<Bool>()
        let ended = OneShot<Bool>()
        /// Bytes were still queued (not yet taken by the socket) when the abort was asked.
        let queuedAtAbort = OneShot<Bool>()

        init(file: ReadableFile, queued: Int64) {
            self.file = file
            self.queued = queued
        }

        func abortNow() {
            lock.withLock { now = true }
            lock.withLock { stream }?.wake()
        }

        func produce(_ stream: PushStream) {
            let first = lock.withLock {
                defer { self.stream = stream }
                return self.stream == nil
            }
            if first {
                stream.send(file, from: 0, to: queued)
                queuedAtAbort.set(stream.connection?.writes.isEmpty == false)
                stream.abortAfterQueued("ended short (test)")
                stream.write([1, 2, 3])  // refused: nothing joins the queue after the abort was asked
                #expect(!stream.hasRoom)
                attached.set(true)
            } else if lock.withLock({ now }) {
                stream.abort("ended at once (test)")
            }
        }

        func ended(_ stream: PushStream, completed: Bool) {
            ended.set(completed)
        }
    }

    static let size = 8 << 20

    /// A server whose one response promises `2 × size` bytes and queues the first `size` of them.
    static func withShortResponse(_ body: @escaping @Sendable (_ port: Int, _ source: ShortSource, _ content: [UInt8]) async throws -> Void) async throws {
        let dir = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("body").path
        let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(content)))
        let source = ShortSource(file: try #require(ReadableFile.open(path)), queued: Int64(size))
        try await withServer(configure: { $0.writeHighWatermark = 256 << 10; $0.writeLowWatermark = 64 << 10 },
                             handler: { _ in Response(body: .push(PushBody(length: Int64(2 * size), source: source))) }) { port in
            try await body(port, source, content)
        }
    }

    @Test func bytesQueuedBeforeAnAbortAfterQueuedAllReachAClientThatIsBehind() async throws {
        try await Self.withShortResponse { port, source, content in
            // The client reads nothing until the abort was asked: megabytes are still queued then.
            let client = try await RawHTTPClient.connect(port: port, receiveBuffer: 16 << 10)
            defer { client.close() }
            try await client.send(get("/short"))
            _ = try await source.attached.value()
            #expect(try await source.queuedAtAbort.value(), "the socket took every byte: nothing tested")
            let head = try await client.readResponseHead()
            #expect(head.status == 200 && head.header("Content-Length") == "\(2 * Self.size)")
            let body = try await client.readToEnd()
            #expect(body.count == Self.size && body == content, "every queued byte, then the close (got \(body.count))")
            #expect(try await source.ended.value() == false)
        }
    }

    @Test func anAbortWhileQueuedBytesWaitClosesAtOnce() async throws {
        try await Self.withShortResponse { port, source, _ in
            let client = try await RawHTTPClient.connect(port: port, receiveBuffer: 16 << 10)
            defer { client.close() }
            try await client.send(get("/short"))
            _ = try await source.attached.value()
            #expect(try await source.queuedAtAbort.value(), "the socket took every byte: nothing tested")
            source.abortNow()
            #expect(try await source.ended.value() == false)
            _ = try await client.readResponseHead()
            let body = try await client.readToEnd()
            // What the kernel's socket buffers held went out; the rest of the queue did not.
            #expect(body.count < Self.size, "closed without sending the queue (got \(body.count))")
        }
    }
}
