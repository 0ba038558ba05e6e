import Basics
import Foundation

/// Time as the engine sees it: monotonic seconds for intervals and wall-clock dates for
/// timestamps. Injected (see `Scheduler`) so rate, ETA, pacing and every timer can be tested.
protocol EngineClock: Sendable {
    /// Monotonic seconds (only differences matter).
    func monotonic() -> Double
    /// Wall-clock time for timestamps and HTTP dates.
    func now() -> Date
    /// Monotonic seconds that also count time the machine was suspended (`AgeingClock`).
    func sinceBoot() -> Double
}

extension EngineClock {
    /// A clock that knows no suspend: its monotonic seconds.
    func sinceBoot() -> Double { monotonic() }
}

/// The real clock: `CLOCK_MONOTONIC` and `Date()`.
struct SystemClock: EngineClock {
    func monotonic() -> Double { monotonicSeconds() }

    func now() -> Date { Date() }

    func sinceBoot() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
