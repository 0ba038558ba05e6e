import Foundation

/// Time-weighted EWMA of a transfer rate. Pure: the caller passes the time.
///
/// Bytes are accumulated and folded in once at least `minSampleInterval` has passed:
/// `sample = bytes / dt`, `a = 1 - exp(-dt / tau)`, `rate = a·sample + (1 - a)·rate`.
/// The first sample after `reset` sets the rate directly (no slow ramp from zero). The ETA is
/// `remaining / rate`, so it moves only as fast as the smoothed rate does.
struct RateEstimator: Sendable, Equatable {
    /// Time constant in seconds.
    var tau: Double
    var minSampleInterval: Double
    private(set) var rate: Double = 0
    private(set) var hasRate = false
    private var windowStart: Double?
    private var windowBytes: Int64 = 0

    init(tau: Double, minSampleInterval: Double = 0.05) {
        self.tau = max(0.001, tau)
        self.minSampleInterval = max(0.001, minSampleInterval)
    }

    /// Forgets everything; the next sample starts a fresh window at `now`.
    mutating func reset(at now: Double) {
        rate = 0
        hasRate = false
        windowStart = now
        windowBytes = 0
    }

    /// Counts `bytes` arriving at `now`.
    mutating func add(_ bytes: Int64, at now: Double) {
        guard let start = windowStart else {
            windowStart = now
            windowBytes = bytes
            return
        }
        windowBytes += bytes
        let dt = now - start
        guard dt >= minSampleInterval else { return }
        let sample = Double(windowBytes) / dt
        if hasRate {
            let a = 1 - exp(-dt / tau)
            rate = a * sample + (1 - a) * rate
        } else {
            rate = sample
            hasRate = true
        }
        windowStart = now
        windowBytes = 0
    }

    /// Folds in a quiet period (no bytes) so a stalled transfer's rate decays.
    mutating func tick(at now: Double) { add(0, at: now) }

    /// Seconds left for `remaining` bytes; nil when the rate or the remaining size is unknown.
    func eta(remaining: Int64?) -> Double? {
        guard let remaining, hasRate, rate > 0 else { return nil }
        return Double(max(0, remaining)) / rate
    }
}
