import Basics
import Foundation
import Glibc
import Testing

/// The one syscall wrapper and `SystemError`, with scripted "system calls" (no real descriptor).
@Suite("Basics: syscall wrapper and SystemError")
struct SyscallTests {
    /// Returns the next scripted result, setting `errno` first when it is -1.
    final class Script {
        var results: [(Int, Int32)]
        var calls = 0
        init(_ results: [(Int, Int32)]) { self.results = results }
        func next() -> Int {
            let (value, code) = results[calls]
            calls += 1
            if value == -1 { errno = code }
            return value
        }
    }

    @Test func eintrIsRetriedAndTheResultReturned() throws {
        let script = Script([(-1, EINTR), (-1, EINTR), (7, 0)])
        #expect(try syscall("read") { script.next() } == 7)
        #expect(script.calls == 3)
    }

    @Test func otherFailuresThrowErrnoAndFunction() {
        let script = Script([(-1, EINTR), (-1, EBADF)])
        #expect(throws: SystemError(errno: EBADF, function: "close")) { try syscall("close") { script.next() } }
        #expect(script.calls == 2)
        let again = Script([(-1, EAGAIN)])
        #expect(throws: SystemError(errno: EAGAIN, function: "recv")) { try syscall("recv") { again.next() } }
    }

    @Test func nonBlockingMapsEAGAINToWouldBlock() throws {
        let script = Script([(-1, EINTR), (-1, EAGAIN), (-1, EWOULDBLOCK), (0, 0), (-1, ECONNRESET)])
        guard case .wouldBlock = try nonBlockingSyscall("recv", { script.next() }) else { Issue.record("EAGAIN"); return }
        guard case .wouldBlock = try nonBlockingSyscall("recv", { script.next() }) else { Issue.record("EWOULDBLOCK"); return }
        guard case .processed(0) = try nonBlockingSyscall("recv", { script.next() }) else { Issue.record("0"); return }
        #expect(throws: SystemError(errno: ECONNRESET, function: "recv")) { try nonBlockingSyscall("recv") { script.next() } }
    }

    @Test func theFunctionNameIsOnlyBuiltOnFailure() throws {
        var built = 0
        func name() -> String { built += 1; return "write" }
        _ = try syscall(name()) { 1 }
        #expect(built == 0)
        _ = try? syscall(name()) { () -> Int32 in errno = EIO; return -1 }
        #expect(built == 1)
    }

    @Test func descriptionAndNoSpace() {
        #expect(SystemError(errno: ENOENT, function: "open").description == "open: No such file or directory (errno 2)")
        #expect(SystemError(errno: ENOSPC, function: "write").isNoSpace)
        #expect(SystemError(errno: EDQUOT, function: "write").isNoSpace)
        #expect(!SystemError(errno: EIO, function: "write").isNoSpace)
    }
}
