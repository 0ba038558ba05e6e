import Foundation

/// The outcome of a non-blocking system call: a value, or "would block" (EAGAIN/EWOULDBLOCK).
enum IOResult<T> {
    case processed(T)
    case wouldBlock
}

/// Runs a system call returning -1 on failure: retries EINTR, throws `SystemError` otherwise.
@inline(__always)
@discardableResult
func syscall<T: FixedWidthInteger>(_ function: @autoclosure () -> String, _ body: () -> T) throws -> T {
    while true {
        let result = body()
        if result == -1 {
            let err = errno
            if err == EINTR { continue }
            throw SystemError(errno: err, function: function())
        }
        return result
    }
}

/// Like `syscall`, but maps EAGAIN/EWOULDBLOCK to `.wouldBlock`.
@inline(__always)
func nonBlockingSyscall<T: FixedWidthInteger>(_ function: @autoclosure () -> String, _ body: () -> T) throws -> IOResult<T> {
    while true {
        let result = body()
        if result == -1 {
            let err = errno
            if err == EINTR { continue }
            if err == EAGAIN || err == EWOULDBLOCK { return .wouldBlock }
            throw SystemError(errno: err, function: function())
        }
        return .processed(result)
    }
}
