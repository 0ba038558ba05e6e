import Foundation

/// A failed system call: the `errno` it set and the function's name.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public var errno: Int32
    public var function: String

    public init(errno: Int32, function: String) {
        self.errno = errno
        self.function = function
    }

    public var description: String {
        "\(function) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
