import Glibc
import Synchronization

/// Whether the engine's own CPU work waits for a CPU. The hash lanes time each chunk they hash by
/// the monotonic clock and by their thread's CPU clock: hashing is pure CPU work, so the difference
/// is time the lane was ready to run and did not (another thread had the core). When the lanes of
/// all downloads together waited for at least `threshold` of a `window` of wall time, `onWaiting`
/// is told, once per window, on the lane (do little: the service asks its serving loops to give
/// way, `EngineConfiguration.onCPUWait`).
///
/// A fetch that is paced by its origin hashes for a few milliseconds per second, so even a lane
/// that waits at every turn stays far below the threshold: only a fetch the CPU holds back counts.
final class CPUWaitMeter: Sendable {
    private let window: Mutex<CPUWaitWindow>
    private let onWaiting: @Sendable () -> Void
    /// Stand-ins for the clocks (tests): monotonic and the calling thread's CPU time, nanoseconds.
    private let monotonic: @Sendable () -> UInt64
    private let threadCPU: @Sendable () -> UInt64

    init(window: CPUWaitWindow = CPUWaitWindow(), onWaiting: @escaping @Sendable () -> Void,
         monotonic: @escaping @Sendable () -> UInt64 = CPUWaitMeter.monotonicNanoseconds,
         threadCPU: @escaping @Sendable () -> UInt64 = CPUWaitMeter.threadCPUNanoseconds) {
        self.window = Mutex(window)
        self.onWaiting = onWaiting
        self.monotonic = monotonic
        self.threadCPU = threadCPU
    }

    /// Runs `body` (pure CPU work) and counts how long it waited for a CPU.
    func timed<T>(_ body: () throws -> T) rethrows -> T {
        let (start, cpuStart) = (monotonic(), threadCPU())
        defer {
            let (end, cpuEnd) = (monotonic(), threadCPU())
            let elapsed = end &- start, ran = cpuEnd &- cpuStart
            let tell = window.withLock { $0.add(at: end, waited: elapsed > ran ? elapsed - ran : 0) }
            if tell { onWaiting() }
        }
        return try body()
    }

    static let monotonicNanoseconds: @Sendable () -> UInt64 = {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    static let threadCPUNanoseconds: @Sendable () -> UInt64 = {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}

/// The waiting counted in the current window of wall time. Pure.
struct CPUWaitWindow: Equatable {
    /// Nanoseconds of wall time per window (default 20 ms).
    let length: UInt64
    /// Nanoseconds of waiting within one window that count as held back (default 1 ms: 5 %).
    let threshold: UInt64
    private(set) var start: UInt64 = 0
    private(set) var waited: UInt64 = 0
    private(set) var told = false

    init(length: UInt64 = 20_000_000, threshold: UInt64 = 1_000_000) {
        self.length = length
        self.threshold = threshold
    }

    /// A piece of work that ended at `end` waited `waited` nanoseconds. Returns true when this
    /// window's waiting just reached the threshold (once per window). A piece that ends after the
    /// window starts the next one (whose start is that end), and so does one ending before the
    /// window's start (a wrapped difference is beyond any window).
    mutating func add(at end: UInt64, waited: UInt64) -> Bool {
        if end &- start >= length {
            start = end
            self.waited = 0
            told = false
        }
        self.waited &+= waited
        guard !told, self.waited >= threshold else { return false }
        told = true
        return true
    }
}
