import Foundation
import Synchronization

/// The one way the engine waits: a clock that also runs work later. Retry backoff, trailing
/// progress, the shutdown bound, progress pacing and state commit batching all go through it, so a
/// test drives every timer with a manual scheduler instead of sleeping.
protocol Scheduler: EngineClock {
    /// Runs `work` once `seconds` have passed on this clock (at once for 0 or less), on a thread of
    /// the scheduler's (never the caller's, never under a lock the caller holds), unless the
    /// returned timer is cancelled first.
    @discardableResult
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer
}

/// A pending piece of scheduled work. Cancelling is idempotent and harmless after it ran.
final class ScheduledTimer: Sendable {
    private let cancelled = Atomic<Bool>(false)

    init() {}

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() {
        cancelled.store(true, ordering: .releasing)
    }
}

/// The real scheduler: the system clock, with work run on one serial dispatch queue (so timers
/// due at the same time run in the order they were scheduled).
struct SystemScheduler: Scheduler {
    private let clock = SystemClock()
    private let queue: DispatchQueue

    init(label: String = "download-engine.timers") {
        queue = DispatchQueue(label: label)
    }

    func monotonic() -> Double { clock.monotonic() }

    func now() -> Date { clock.now() }

    func sinceBoot() -> Double { clock.sinceBoot() }

    @discardableResult
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let timer = ScheduledTimer()
        let run: @Sendable () -> Void = { if !timer.isCancelled { work() } }
        if seconds > 0 {
            queue.asyncAfter(deadline: .now() + seconds, execute: run)
        } else {
            queue.async(execute: run)
        }
        return timer
    }
}
