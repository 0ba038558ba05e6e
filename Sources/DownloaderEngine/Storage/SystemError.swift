import Glibc

/// A failed system call: `errno` and the function's name.
struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    var errno: Int32
    var function: String

    var description: String { "\(function): \(String(cString: strerror(errno))) (errno \(errno))" }

    var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}

/// Runs a system call, retrying on EINTR, throwing `SystemError` when it returns -1.
@discardableResult
func retryingEINTR<T: BinaryInteger>(_ function: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result == -1 {
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(errno: code, function: function)
        }
        return result
    }
}
