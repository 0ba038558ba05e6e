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
}
