import Foundation
import Testing
@testable import DownloadService

/// The `/fetch` handler's wait for the download's head: a change, the timeout or cancellation ends
/// it, whichever comes first, and nothing of an earlier wait ends a later one.
@Suite(.timeLimit(.minutes(1)))
struct ChangeSignalTests {
    private static func seconds(_ body: () async -> Void) async -> Double {
        let start = Date()
        await body()
        return Date().timeIntervalSince(start)
    }

    @Test func aSignalWakesTheWaiter() async {
        let signal = ChangeSignal()
        let took = await Self.seconds {
            let waiter = Task { await signal.wait(seconds: 20) }
            try? await Task.sleep(for: .milliseconds(200))
            signal.signal()
            await waiter.value
        }
        #expect(took < 10, "woke after \(took) s")
    }

    @Test func aSignalWithNobodyWaitingEndsTheNextWaitAtOnceAndOnlyThatOne() async {
        let signal = ChangeSignal()
        signal.signal()
        signal.signal()
        let first = await Self.seconds { await signal.wait(seconds: 20) }
        #expect(first < 5)
        let second = await Self.seconds { await signal.wait(seconds: 0.3) }
        #expect(second >= 0.25, "a pending change is used once: \(second) s")
    }

    @Test func theTimeoutEndsAWaitNobodySignals() async {
        let signal = ChangeSignal()
        let took = await Self.seconds { await signal.wait(seconds: 0.3) }
        #expect(took >= 0.25 && took < 10, "\(took) s")
    }

    @Test func cancellationEndsTheWait() async {
        let signal = ChangeSignal()
        let waiter = Task { await Self.seconds { await signal.wait(seconds: 20) } }
        try? await Task.sleep(for: .milliseconds(200))
        waiter.cancel()
        let took = await waiter.value
        #expect(took < 10, "\(took) s")
        // A cancelled task does not wait at all.
        let again = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await Self.seconds { await signal.wait(seconds: 20) }
        }
        #expect(await again.value < 5)
    }

    /// The timer of a wait that a signal ended must not end the next wait early.
    @Test func anEarlierWaitsTimerDoesNotEndALaterWait() async {
        let signal = ChangeSignal()
        let first = Task { await signal.wait(seconds: 1.5) }
        try? await Task.sleep(for: .milliseconds(100))
        signal.signal()
        await first.value
        // A signal that found nobody waiting (the first wait had not begun yet on a loaded machine)
        // is used up here, not by the second wait.
        await signal.wait(seconds: 0)
        let second = Task { () -> Date in
            await signal.wait(seconds: 20)
            return Date()
        }
        // The first wait's timer fires meanwhile; only this signal may end the second wait.
        try? await Task.sleep(for: .milliseconds(2500))
        let signalled = Date()
        signal.signal()
        let ended = await second.value
        #expect(ended >= signalled, "the second wait ended \(signalled.timeIntervalSince(ended)) s before its signal")
    }
}
