import Foundation

struct TimeoutError: Error, CustomStringConvertible {
    var seconds: Double
    var description: String { "timed out after \(seconds) s" }
}

/// Runs `body`, failing with `TimeoutError` if it takes longer than `seconds`.
func withTimeout<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
            throw TimeoutError(seconds: seconds)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
