import Foundation
import Testing
@testable import MiniHTTPServer

@Suite("PendingWrites and TimerHeap")
struct PendingWritesAndTimerTests {
    /// A descriptor on a file of its own, so that "closed" can be told apart from "closed, and its
    /// number reused by a test running in parallel" (which `fcntl` alone cannot).
    static func uniqueDescriptor() throws -> (fd: Int32, path: String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)").path
        try #require(FileManager.default.createFile(atPath: path, contents: Data()))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        return (fd, path)
    }

    /// True when `fd` no longer refers to `path`.
    static func isClosed(_ fd: Int32, path: String) -> Bool {
        defer { unlink(path) }
        let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")
        return target != path
    }

    @Test func watermarksTrackQueuedBytes() {
        var writes = PendingWrites(highWatermark: 10, lowWatermark: 4)
        #expect(writes.isEmpty && writes.isBelowLowWatermark)
        writes.append(Array(repeating: 1, count: 6))
        writes.append([])  // ignored
        writes.append(Array(repeating: 2, count: 6))
        #expect(writes.pendingBytes == 12)
        #expect(writes.isAboveHighWatermark)
        writes.advance(by: 4)
        guard case .bytes(_, let offset)? = writes.first else { Issue.record("expected bytes"); return }
        #expect(offset == 4)
        #expect(!writes.isAboveHighWatermark && !writes.isBelowLowWatermark)
        writes.advance(by: 2)  // first buffer done
        guard case .bytes(let second, 0)? = writes.first else { Issue.record("expected second buffer"); return }
        #expect(second.first == 2)
        writes.advance(by: 6)
        #expect(writes.isEmpty && writes.pendingBytes == 0)
    }

    @Test func fileRangesCountAndCloseTheirDescriptor() throws {
        let (fd, path) = try Self.uniqueDescriptor()
        var writes = PendingWrites(highWatermark: 100, lowWatermark: 10)
        writes.appendFile(fd: fd, offset: 10, end: 60)
        #expect(writes.pendingBytes == 50)
        writes.advance(by: 20)
        guard case .file(_, let offset, let end)? = writes.first else { Issue.record("expected file"); return }
        #expect(offset == 30 && end == 60)
        writes.advance(by: 30)
        #expect(writes.isEmpty)
        #expect(Self.isClosed(fd, path: path))  // closed by the queue
    }

    @Test func removeAllClosesFiles() throws {
        let (fd, path) = try Self.uniqueDescriptor()
        var writes = PendingWrites(highWatermark: 100, lowWatermark: 10)
        writes.append([1, 2, 3])
        writes.appendFile(fd: fd, offset: 0, end: 5)
        writes.removeAll()
        #expect(writes.isEmpty && writes.pendingBytes == 0)
        #expect(Self.isClosed(fd, path: path))
    }

    @Test func timerHeapPopsInDeadlineThenInsertionOrder() {
        var heap = TimerHeap()
        var fired: [Int] = []
        let deadlines: [UInt64] = [50, 10, 40, 10, 30, 20, 60, 5]
        for (i, d) in deadlines.enumerated() {
            heap.push(d, .registration(fd: Int32(i), id: 0))
        }
        #expect(heap.nextDeadline == 5)
        while let entry = heap.popDue(now: 45) {
            if case .registration(let fd, _) = entry.action { fired.append(Int(fd)) }
        }
        #expect(fired == [7, 1, 3, 5, 4, 2])
        #expect(heap.count == 2)
        #expect(heap.nextDeadline == 50)
    }
}
