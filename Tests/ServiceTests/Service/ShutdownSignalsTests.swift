import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloadService

/// A shutdown signal that arrives while the service is still starting is kept, not lost or fatal.
/// (One test only: the C handler can be installed once per process.)
@Suite struct ShutdownSignalsTests {
    @Test func aSignalBeforeTheActionIsGivenStillRunsItOnce() async throws {
        let signals = try #require(ShutdownSignals([SIGUSR2]))
        kill(getpid(), SIGUSR2)  // Right away, before `whenSignalled`: the service is not ready yet.
        kill(getpid(), SIGUSR2)  // A second signal changes nothing.
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
    }
}
