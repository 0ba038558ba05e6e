/// When a download's progress is told: at most once per `interval` while bytes arrive, and the last
/// bytes once more one interval after the previous event even when no further byte comes (a
/// stalling origin), through one trailing timer at a time. Pure; times are monotonic seconds.
struct ProgressThrottle: Equatable, Sendable {
    enum Decision: Equatable, Sendable {
        case emit
        /// Arm the trailing timer (none is pending) to fire after this many seconds.
        case scheduleTrailing(after: Double)
        case wait
    }

    let interval: Double
    private(set) var lastAt = -Double.infinity
    private(set) var lastBytes: Int64 = -1
    private(set) var trailingPending = false

    init(interval: Double) {
        self.interval = interval
    }

    /// Bytes arrived at `now`.
    mutating func bytesArrived(at now: Double) -> Decision {
        let since = now - lastAt
        if since >= interval { return .emit }
        guard !trailingPending else { return .wait }
        trailingPending = true
        return .scheduleTrailing(after: interval - since)
    }

    /// The trailing timer fired: true when `bytes` were not told yet.
    mutating func trailingDue(bytes: Int64) -> Bool {
        trailingPending = false
        return bytes != lastBytes
    }

    mutating func emitted(at now: Double, bytes: Int64) {
        lastAt = now
        lastBytes = bytes
    }

    /// A transfer (re)started at `now`: the next progress is due one interval later.
    mutating func restart(at now: Double) {
        lastAt = now
    }
}
