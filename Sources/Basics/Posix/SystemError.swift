import Glibc

/// A failed system call: the `errno` it set and the function's name.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var errno: Int32
    public var function: String

    public init(errno: Int32, function: String) {
        self.errno = errno
        self.function = function
    }

    /// `function: message (errno N)`, e.g. `bind: Address already in use (errno 98)`.
    public var description: String { "\(function): \(String(cString: strerror(errno))) (errno \(errno))" }

    /// The device or the user's quota is full (ENOSPC, EDQUOT).
    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}
