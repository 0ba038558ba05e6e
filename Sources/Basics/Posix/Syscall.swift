import Glibc

/// The outcome of a non-blocking system call: a value, or "would block" (EAGAIN/EWOULDBLOCK).
public enum IOResult<T> {
    case processed(T)
    case wouldBlock
}

/// Runs a system call that returns -1 on failure: retries EINTR, throws `SystemError(errno,
/// function)` otherwise. `function` is only evaluated on failure. Inlinable: the server's reads and
/// sends go through it once or twice per request.
@inlinable @inline(__always)
@discardableResult
public func syscall<T: FixedWidthInteger>(_ function: @autoclosure () -> String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result == -1 {
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(errno: code, function: function())
        }
        return result
    }
}

/// Like `syscall`, but EAGAIN/EWOULDBLOCK come back as `.wouldBlock` (non-blocking descriptors).
@inlinable @inline(__always)
public func nonBlockingSyscall<T: FixedWidthInteger>(_ function: @autoclosure () -> String,
                                                     _ body: () -> T) throws(SystemError) -> IOResult<T> {
    while true {
        let result = body()
        if result == -1 {
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock }
            throw SystemError(errno: code, function: function())
        }
        return .processed(result)
    }
}
