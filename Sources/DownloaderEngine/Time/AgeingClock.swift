import Foundation

/// The "now" that ages are measured against before something is deleted or a safety window
/// closes (cache retention, the paused TTL, forgotten failures, the orphan sweep's safe age, the
/// `changed` window): the wall clock, but never further past the engine's start than the time
/// elapsed since (`CLOCK_BOOTTIME`: a suspended machine's night counts). A wall clock stepped
/// forward (NTP correcting a host that booted behind, an operator's `date -s`) would otherwise age
/// every cache file, paused partial and failure by the step at once, and the purges that follow
/// cannot be undone. The price: after such a step every age reads short by it until the process
/// restarts (purges come that much later, and the `changed` window lasts that much longer). A step
/// back only makes ages shorter: nothing goes early. Stamps stay wall-clock (they outlive the
/// process). Pure but for the anchor.
struct AgeingClock: Sendable {
    let startWall: Date
    let startSinceBoot: Double

    /// Anchored at `clock`'s present (the engine's start).
    init(_ clock: EngineClock) {
        startWall = clock.now()
        startSinceBoot = clock.sinceBoot()
    }

    /// `wall`, or the start's wall time plus the seconds elapsed since, whichever is earlier.
    func now(wall: Date, sinceBoot: Double) -> Date {
        min(wall, startWall.addingTimeInterval(max(0, sinceBoot - startSinceBoot)))
    }

    func now(_ clock: EngineClock) -> Date { now(wall: clock.now(), sinceBoot: clock.sinceBoot()) }
}
