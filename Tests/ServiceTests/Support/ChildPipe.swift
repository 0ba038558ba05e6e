import Basics
import Foundation
import Glibc

/// A pipe for one `ChildProcess`'s stdout or stderr: both ends close-on-exec (so no other child
/// inherits them); the child gets the write end through `dup2`, and `ChildProcess.run` closes the
/// parent's copy, so the read end sees end-of-file when the child (and its own children) exit.
final class ChildPipe: @unchecked Sendable {
    let readEnd: Int32
    private let lock = NSLock()
    private var write: Int32?

    init() throws {
        var fds: [Int32] = [-1, -1]
        try syscall("pipe2") { GNU.pipe2(&fds, O_CLOEXEC) }
        (readEnd, write) = (fds[0], fds[1])
    }

    /// The parent's write end, until `closeWriteEnd`.
    var writeEnd: Int32? {
        lock.lock(); defer { lock.unlock() }
        return write
    }

    func closeWriteEnd() {
        lock.lock(); defer { lock.unlock() }
        if let fd = write { close(fd) }
        write = nil
    }

    deinit {
        closeWriteEnd()
        close(readEnd)
    }

    /// Reads until end-of-file or `timeout` seconds, whichever comes first: what arrived by then.
    func readToEnd(timeout: Double = 60) -> Data {
        let deadline = Date().addingTimeInterval(timeout)
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return data }
            var poller = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            guard let ready = try? syscall("poll", { poll(&poller, 1, Int32(min(left, 1) * 1000) + 1) }) else { return data }
            if ready == 0 { continue }
            guard let n = try? syscall("read", { chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) } }),
                  n > 0 else { return data }
            data.append(contentsOf: chunk[..<n])
        }
    }

    /// `readToEnd` as UTF-8 text.
    func readText(timeout: Double = 60) -> String {
        String(decoding: readToEnd(timeout: timeout), as: UTF8.self)
    }
}
