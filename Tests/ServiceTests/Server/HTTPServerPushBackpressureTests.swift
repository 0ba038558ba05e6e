import Foundation
import Glibc
import Synchronization
import Testing
@testable import MiniHTTPServer

/// A push stream whose client is behind: `isWaitingForClient` says so from any thread, ranges
/// queued meanwhile wait for the socket (no send that can only fail), and every byte still arrives.
@Suite("HTTPServer push streams behind their client")
struct HTTPServerPushBackpressureTests {
    /// Queues every range it is handed (from any thread, through `wake`); finishes when told.
    final class RangeSource: PushSource, @unchecked Sendable {
        private let lock = NSLock()
        private var ranges: [(ReadableFile, Int64, Int64)] = []
        private var finishing = false
        private var stream: PushStream?
        let attached = OneShot<Bool>()
        let ended = OneShot<Bool>()

        func feed(_ file: ReadableFile, _ from: Int64, _ to: Int64, finish: Bool = false) {
            let stream = lock.withLock {
                ranges.append((file, from, to))
                finishing = finishing || finish
                return self.stream
            }
            stream?.wake()
        }

        /// The stream's view, from the test's thread.
        var waitingForClient: Bool { lock.withLock { stream?.isWaitingForClient ?? false } }

        func produce(_ stream: PushStream) {
            let (pending, finish) = lock.withLock {
                self.stream = stream
                defer { ranges.removeAll() }
                return (ranges, finishing)
            }
            attached.set(true)
            for (file, from, to) in pending { stream.send(file, from: from, to: to) }
            if finish { stream.finish() }
        }

        func ended(_ stream: PushStream, completed: Bool) {
            lock.withLock { self.stream = nil }
            ended.set(completed)
        }
    }

    @Test func rangesQueuedWhileTheClientIsBehindAllArrive() async throws {
        let dir = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("body").path
        let content = (0..<(16 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(content)))
        let file = try #require(ReadableFile.open(path))
        let source = RangeSource()
        try await withServer(configure: { $0.writeHighWatermark = 256 << 10; $0.writeLowWatermark = 64 << 10 },
                             handler: { _ in Response(body: .push(PushBody(length: Int64(content.count), source: source))) }) { port in
            // A client that reads nothing at first: the socket fills and the stream waits for it.
            let client = try await RawHTTPClient.connect(port: port, receiveBuffer: 16 << 10)
            try await client.send(get("/behind"))
            _ = try await source.attached.value()
            let step = Int64(1 << 20)
            source.feed(file, 0, 4 * step)
            let deadline = Date().addingTimeInterval(20)
            while !source.waitingForClient, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(source.waitingForClient, "4 MiB queued for a client that reads nothing")
            // More ranges while it is behind: they join the queue (contiguous ones merge).
            var offset = 4 * step
            while offset < Int64(content.count) {
                let end = min(offset + step, Int64(content.count))
                source.feed(file, offset, end, finish: end == Int64(content.count))
                offset = end
            }
            let response = try await client.readResponse()
            #expect(response.body.count == content.count)
            #expect(response.body == content)
            #expect(try await source.ended.value() == true)
            #expect(!source.waitingForClient)
        }
    }
}
