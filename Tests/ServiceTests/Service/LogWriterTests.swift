import Foundation
import Testing
@testable import DownloadService

/// The log's own writer thread: order kept, nothing lost while there is room, bounded when the
/// reader stalls, and the loss reported.
@Suite struct LogWriterTests {
    /// Reads `fd` to EOF on a thread; `wait` returns what was read (nil after `timeout`).
    final class PipeReader: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var bytes: [UInt8] = []

        init(fd: Int32) {
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = read(fd, &buffer, buffer.count)
                    if n > 0 { bytes.append(contentsOf: buffer[..<n]) } else if n < 0 && errno == EINTR { continue } else { break }
                }
                close(fd)
                done.signal()
            }.start()
        }

        func wait(timeout: TimeInterval = 10) -> [String]? {
            guard done.wait(timeout: .now() + timeout) == .success else { return nil }
            return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    static func pipeEnds() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        return (fds[0], fds[1])
    }

    /// Fills the pipe's buffer with lines of `f` (non-blocking writes until it is full).
    static func fillPipe(_ fd: Int32) throws {
        let flags = fcntl(fd, F_GETFL)
        try #require(fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        let line = Array(String(repeating: "f", count: 63).utf8) + [UInt8(ascii: "\n")]
        while line.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        try #require(errno == EAGAIN)
    }

    // The waits run on threads of their own (`onThread`), not on the shared test executor.
    @Test func writesEveryLineInOrder() async throws {
        let ends = try Self.pipeEnds()
        let reader = PipeReader(fd: ends.read)
        let writer = LogWriter(fileDescriptor: ends.write, capacity: 1 << 20)
        for i in 0..<5_000 { writer.append(Array("line \(i)".utf8)) }
        try await onThread { writer.flush(timeout: 10) }
        close(ends.write)
        let lines = try #require(try await onThread { reader.wait() })
        #expect(lines == (0..<5_000).map { "line \($0)" })
    }

    @Test func dropsBeyondCapacityAndSaysHowMany() async throws {
        let ends = try Self.pipeEnds()
        let writer = LogWriter(fileDescriptor: ends.write, capacity: 4096)
        // Nobody reads yet: the pipe (64 KiB) and then the 4 KiB queue fill up.
        let line = Array(String(repeating: "x", count: 99).utf8)
        let total = 3_000
        for _ in 0..<total { writer.append(line) }
        let reader = PipeReader(fd: ends.read)
        try await onThread { writer.flush(timeout: 10) }
        close(ends.write)
        let lines = try #require(try await onThread { reader.wait() })
        let written = lines.filter { $0 == String(repeating: "x", count: 99) }.count
        // One report per batch that followed drops (the queue can overflow again while the pipe
        // still takes batches); together they account for every line.
        let reports = lines.filter { $0.contains("log lines dropped") }
        let counts = reports.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["count"] as? Int }
        #expect(!reports.isEmpty && counts.count == reports.count, "\(reports)")
        let dropped = counts.reduce(0, +)
        #expect(dropped > 0 && written + dropped == total, "written \(written), dropped \(dropped)")
        #expect(written * 100 <= 65_536 + 2 * 4096, "more was kept than the pipe and the queue hold: \(written) lines")
    }

    /// Story lines (reserved) are never dropped: ordinary lines are, once the queue is full; a
    /// story line beyond the reserve waits for room instead, and every one is written, in order.
    @Test func reservedLinesAreNeverDroppedTheyWait() async throws {
        let ends = try Self.pipeEnds()
        let writer = LogWriter(fileDescriptor: ends.write, capacity: 4096, reserve: 4096)
        let ordinary = Array(String(repeating: "x", count: 99).utf8)
        // Nobody reads yet and the pipe is full: the writer blocks on its first batch, then the
        // 4 KiB queue fills up with ordinary lines.
        try Self.fillPipe(ends.write)
        for _ in 0..<1_000 { writer.append(ordinary) }
        let stories = 200  // 20 KB: more than the reserve
        let done = DispatchSemaphore(value: 0)
        Thread {
            for i in 0..<stories { writer.append(Array(String(format: "story %03d %@", i, String(repeating: "s", count: 89)).utf8), reserved: true) }
            done.signal()
        }.start()
        let waitedForRoom = try await onThread { done.wait(timeout: .now() + 0.5) == .timedOut }
        #expect(waitedForRoom, "the story lines went beyond the reserve without waiting: some were dropped or the bound ignored")
        writer.append(ordinary)  // the queue is full: dropped
        let reader = PipeReader(fd: ends.read)
        let appended = try await onThread { done.wait(timeout: .now() + 10) == .success }
        #expect(appended)
        try await onThread { writer.flush(timeout: 10) }
        close(ends.write)
        let lines = try #require(try await onThread { reader.wait() })
        let written = lines.filter { $0.hasPrefix("story ") }.map { String($0.prefix(9)) }
        #expect(written == (0..<stories).map { String(format: "story %03d", $0) })
        let dropped = lines.compactMap { line -> Int? in
            guard line.contains("log lines dropped") else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["count"] as? Int
        }.reduce(0, +)
        #expect(dropped > 0 && dropped + lines.filter { $0 == String(repeating: "x", count: 99) }.count == 1_001)
    }
}
