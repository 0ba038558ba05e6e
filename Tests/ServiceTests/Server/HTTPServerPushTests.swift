import Foundation
import Glibc
import Synchronization
import Testing
@testable import MiniHTTPServer

/// Live tests of push-fed bodies (`ResponseBody.push`): fed from other threads, driven by the loop.
@Suite("HTTPServer push streams")
struct HTTPServerPushTests {
    /// A source fed by the test: bytes and file ranges it is handed, then finish or abort; it
    /// records how it ended and how often it was asked to produce.
    final class ScriptedSource: PushSource, @unchecked Sendable {
        enum Step { case bytes([UInt8]), range(ReadableFile, Int64, Int64), finish, abort }
        private let lock = NSLock()
        private var steps: [Step] = []
        private var stream: PushStream?
        private(set) var produceCalls = 0
        let ended = OneShot<Bool>()
        let attached = OneShot<Bool>()

        /// Any thread: queues `step` and wakes the stream.
        func feed(_ step: Step) {
            let stream = lock.withLock {
                steps.append(step)
                return self.stream
            }
            stream?.wake()
        }

        func produce(_ stream: PushStream) {
            let pending = lock.withLock {
                produceCalls += 1
                self.stream = stream
                defer { steps.removeAll() }
                return steps
            }
            attached.set(true)
            for step in pending {
                switch step {
                case .bytes(let b): stream.write(b)
                case .range(let file, let from, let to): stream.send(file, from: from, to: to)
                case .finish: stream.finish()
                case .abort: stream.abort()
                }
            }
        }

        func ended(_ stream: PushStream, completed: Bool) {
            lock.withLock { self.stream = nil }
            ended.set(completed)
        }

        var produced: Int { lock.withLock { produceCalls } }
    }

    @Test func chunkedBytesFedFromAnotherThread() async throws {
        let source = ScriptedSource()
        try await withServer(handler: { _ in Response(body: .push(PushBody(source: source))) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            let head = try await client.readResponseHead()
            #expect(head.header("Transfer-Encoding") == "chunked")
            _ = try await source.attached.value()
            source.feed(.bytes(Array("one".utf8)))
            #expect(try await client.readChunk() == Array("one".utf8))
            source.feed(.bytes(Array("two".utf8)))
            source.feed(.finish)
            #expect(try await client.readChunk() == Array("two".utf8))
            #expect(try await client.readChunk() == nil)
            #expect(try await source.ended.value() == true)
            // The connection stays usable after a push body.
            try await client.send(get("/again"))
            #expect(try await client.readResponseHead().status == 200)
        }
    }

    @Test func aGrowingFileIsTailedWithContentLength() async throws {
        let dir = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("growing").path
        let writer = try #require(FileHandle(forWritingAtPath: { _ = FileManager.default.createFile(atPath: path, contents: nil); return path }()))
        let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let source = ScriptedSource()
        try await withServer(handler: { _ in Response(body: .push(PushBody(length: Int64(content.count), source: source))) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/tail"))
            _ = try await source.attached.value()
            let file = try #require(ReadableFile.open(path))
            var offset = 0
            for end in [1, 100_000, 100_001, 250_000, 300_000] {
                try writer.write(contentsOf: Data(content[offset..<end]))
                source.feed(.range(file, Int64(offset), Int64(end)))
                offset = end
            }
            source.feed(.finish)
            let response = try await client.readResponse()
            #expect(response.header("Content-Length") == "300000")
            #expect(response.header("Transfer-Encoding") == nil)
            #expect(response.body == content)
            #expect(try await source.ended.value() == true)
        }
        try writer.close()
    }

    @Test func abortTruncatesALengthFramedBody() async throws {
        let source = ScriptedSource()
        try await withServer(handler: { _ in Response(body: .push(PushBody(length: 10, source: source))) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/short"))
            _ = try await source.attached.value()
            source.feed(.bytes(Array("12345".utf8)))
            source.feed(.abort)
            let head = try await client.readResponseHead()
            #expect(head.header("Content-Length") == "10")
            let rest = try await client.readToEnd()
            #expect(rest == Array("12345".utf8), "five of ten bytes, then the connection closes")
            #expect(try await source.ended.value() == false)
        }
    }

    @Test func finishingShortOfTheLengthAbortsToo() async throws {
        let source = ScriptedSource()
        try await withServer(handler: { _ in Response(body: .push(PushBody(length: 4, source: source))) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/short"))
            _ = try await source.attached.value()
            source.feed(.bytes([1, 2]))
            source.feed(.finish)
            _ = try await client.readResponseHead()
            #expect(try await client.readToEnd() == [1, 2])
            #expect(try await source.ended.value() == false)
        }
    }

    @Test func theClientLeavingEndsTheSource() async throws {
        let source = ScriptedSource()
        try await withServer(handler: { _ in Response(body: .push(PushBody(source: source))) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            _ = try await client.readResponseHead()
            _ = try await source.attached.value()
            client.close()
            #expect(try await source.ended.value() == false)
        }
    }

    @Test func headEndsTheSourceWithoutProducing() async throws {
        let source = ScriptedSource()
        try await withServer(handler: { _ in Response(body: .push(PushBody(length: 42, source: source))) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send("HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n")
            let head = try await client.readResponse(bodyless: true)
            #expect(head.header("Content-Length") == "42")
            #expect(try await source.ended.value() == true)
            #expect(source.produced == 0)
        }
    }

    /// Writes 64 KiB chunks while the stream has room, never waking itself: the rest of the body
    /// only arrives if the loop asks again each time queued output drained.
    final class GeneratorSource: PushSource, @unchecked Sendable {
        let total: Int
        private let lock = NSLock()
        private var sent = 0
        private var calls = 0
        private var roomlessCalls = 0
        let ended = OneShot<Bool>()

        init(total: Int) { self.total = total }

        func produce(_ stream: PushStream) {
            lock.withLock { calls += 1 }
            while stream.hasRoom, lock.withLock({ sent < total }) {
                let count = lock.withLock { () -> Int in
                    let n = min(64 << 10, total - sent)
                    sent += n
                    return n
                }
                stream.write([UInt8](repeating: 5, count: count))
            }
            if !stream.hasRoom { lock.withLock { roomlessCalls += 1 } }
            if lock.withLock({ sent == total }) { stream.finish() }
        }

        func ended(_ stream: PushStream, completed: Bool) { ended.set(completed) }

        var counts: (calls: Int, stoppedForRoom: Int) { lock.withLock { (calls, roomlessCalls) } }
    }

    @Test func theLoopAsksForMoreEachTimeOutputDrained() async throws {
        let source = GeneratorSource(total: 8 << 20)
        try await withServer(configure: { $0.writeHighWatermark = 256 << 10; $0.writeLowWatermark = 64 << 10 },
                             handler: { _ in Response(body: .push(PushBody(source: source))) }) { port in
            // A client that reads nothing until the watermark stopped the producer: with a reader as fast
            // as the loop, the kernel takes every write at once and the queue never fills.
            let client = try await RawHTTPClient.connect(port: port, receiveBuffer: 16 << 10)
            try await client.send(get("/big"))
            let deadline = Date().addingTimeInterval(20)
            while source.counts.stoppedForRoom == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
            let response = try await client.readResponse()
            #expect(response.body.count == 8 << 20)
            #expect(try await source.ended.value() == true)
            let counts = source.counts
            #expect(counts.calls > 1, "called again after draining: \(counts)")
            #expect(counts.stoppedForRoom >= 1, "the watermark stopped it at least once: \(counts)")
        }
    }
}
