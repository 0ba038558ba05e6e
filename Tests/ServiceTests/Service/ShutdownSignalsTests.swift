import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloadService

/// A shutdown signal that arrives while the service is still starting is kept, not lost or fatal.
/// (One test only: the C handler can be installed once per process.)
@Suite struct ShutdownSignalsTests {
    @Test func aSignalBeforeTheActionIsGivenStillRunsItOnce() async throws {
        let repeats = Mutex<[Int32]>([])
        let signals = try #require(ShutdownSignals([SIGUSR2]) { number in repeats.withLock { $0.append(number) } })
        kill(getpid(), SIGUSR2)  // Right away, before `whenSignalled`: the service is not ready yet.
        let calls = Mutex<[Int32]>([])
        let called = AsyncStream<Void>.makeStream()
        signals.whenSignalled { number in
            calls.withLock { $0.append(number) }
            called.continuation.yield()
        }
        try await withTimeout(10) {
            var iterator = called.stream.makeAsyncIterator()
            _ = await iterator.next()
        }
        #expect(calls.withLock { $0 } == [SIGUSR2])
        // A second signal (once the first was taken: the kernel merges a pending one) is a repeat
        // (the service exits at once on it), not a second action.
        kill(getpid(), SIGUSR2)
        try await withTimeout(10) { while repeats.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) } }
        #expect(repeats.withLock { $0 } == [SIGUSR2])
    }
}
