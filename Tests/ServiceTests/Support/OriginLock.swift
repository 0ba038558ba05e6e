import Foundation

/// A value behind an `NSLock` (a pthread mutex). The test helpers use it rather than
/// `Synchronization.Mutex`, whose futex-based lock ThreadSanitizer cannot see, so that
/// `swift test --sanitize=thread` reports only real races.
final class OriginLock<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
