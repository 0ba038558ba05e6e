import Foundation

/// Runs blocking work (socket reads, process waits) on its own thread, so that live tests never
/// tie up the small cooperative pool that in-process servers and engines under test need.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try body() })
        }
    }
}
