import Foundation

/// The "now" that ages are measured against before something is deleted or a safety window
/// closes (cache retention, the paused TTL, forgotten failures, the orphan sweep's safe age, the
/// `changed` window): the wall clock, but never further past the engine's start than the
/// monotonic time since. A wall clock stepped forward (NTP correcting a host that booted behind,
/// an operator's `date -s`) would otherwise age every cache file, paused partial and failure by
/// the step at once, and the purges that follow cannot be undone. A step back only makes ages
/// shorter: nothing goes early. Stamps stay wall-clock (they outlive the process), so a stamp
/// made after a forward step reads as young until the process restarts. Pure but for the anchor.
struct AgeingClock: Sendable {
    let startWall: Date
    let startMonotonic: Double

    /// Anchored at `clock`'s present (the engine's start).
    init(_ clock: EngineClock) {
        startWall = clock.now()
        startMonotonic = clock.monotonic()
    }

    /// `wall`, or the start's wall time plus the monotonic seconds since, whichever is earlier.
    func now(wall: Date, monotonic: Double) -> Date {
        min(wall, startWall.addingTimeInterval(max(0, monotonic - startMonotonic)))
    }

    func now(_ clock: EngineClock) -> Date { now(wall: clock.now(), monotonic: clock.monotonic()) }
}
