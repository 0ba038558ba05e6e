import Basics
import Synchronization

/// Whether the fetches are held back by a CPU: the hash lanes time each chunk they hash by the
/// monotonic clock and by their thread's CPU clock (hashing is pure CPU work, so the difference is
/// time the lane was ready to run and did not: another thread had the core), and the transfers time
/// how long they wait for a free buffer (the lanes are behind: the bytes arrive faster than they
/// are hashed and written). When, within one `window` of wall time, both reach their threshold,
/// `onWaiting` is told (once per window, on the lane or the transfer thread: do little; the service
/// asks its serving loops to give way, `EngineConfiguration.onCPUWait`).
///
/// Both are needed: a fetch paced by its origin never waits for a buffer, however long its lane
/// waits for a core at each chunk (it would not arrive sooner), and a fetch held back by its disk
/// waits for buffers while its hashing does not wait for a core.
final class CPUWaitMeter: Sendable {
    private let window: Mutex<CPUWaitWindow>
    private let onWaiting: @Sendable () -> Void
    /// Stand-ins for the clocks (tests): monotonic and the calling thread's CPU time, nanoseconds.
    let monotonic: @Sendable () -> UInt64
    private let threadCPU: @Sendable () -> UInt64

    init(window: CPUWaitWindow = CPUWaitWindow(), onWaiting: @escaping @Sendable () -> Void,
         monotonic: @escaping @Sendable () -> UInt64 = { monotonicNanoseconds() },
         threadCPU: @escaping @Sendable () -> UInt64 = { threadCPUNanoseconds() }) {
        self.window = Mutex(window)
        self.onWaiting = onWaiting
        self.monotonic = monotonic
        self.threadCPU = threadCPU
    }

    /// Runs `body` (pure CPU work: hashing) and counts how long it waited for a CPU.
    func timed<T>(_ body: () throws -> T) rethrows -> T {
        let (start, cpuStart) = (monotonic(), threadCPU())
        defer {
            let (end, cpuEnd) = (monotonic(), threadCPU())
            let elapsed = end &- start, ran = cpuEnd &- cpuStart
            add(at: end, cpuWait: elapsed > ran ? elapsed - ran : 0, heldBack: 0)
        }
        return try body()
    }

    /// A transfer waited for a free buffer from `start` (a `monotonic` reading) until now.
    func heldBack(since start: UInt64) {
        let end = monotonic()
        add(at: end, cpuWait: 0, heldBack: end &- start)
    }

    private func add(at end: UInt64, cpuWait: UInt64, heldBack: UInt64) {
        if window.withLock({ $0.add(at: end, cpuWait: cpuWait, heldBack: heldBack) }) { onWaiting() }
    }
}

/// The waiting counted in the current window of wall time. Pure.
struct CPUWaitWindow: Equatable {
    /// Nanoseconds of wall time per window (default 20 ms).
    let length: UInt64
    /// Nanoseconds of waiting for a CPU, and for a buffer, within one window that count as held
    /// back (default 1 ms each: 5 %).
    let threshold: UInt64
    private(set) var start: UInt64 = 0
    private(set) var cpuWait: UInt64 = 0
    private(set) var heldBack: UInt64 = 0
    private(set) var told = false

    init(length: UInt64 = 20_000_000, threshold: UInt64 = 1_000_000) {
        self.length = length
        self.threshold = threshold
    }

    /// A piece of work that ended at `end` waited `cpuWait` nanoseconds for a CPU, or a transfer
    /// waited `heldBack` for a buffer. Returns true when both just reached the threshold in this
    /// window (once per window). A piece that ends after the window starts the next one (whose
    /// start is that end), and so does one ending before the window's start (a wrapped difference
    /// is beyond any window).
    mutating func add(at end: UInt64, cpuWait: UInt64, heldBack: UInt64) -> Bool {
        if end &- start >= length {
            start = end
            self.cpuWait = 0
            self.heldBack = 0
            told = false
        }
        self.cpuWait &+= cpuWait
        self.heldBack &+= heldBack
        guard !told, self.cpuWait >= threshold, self.heldBack >= threshold else { return false }
        told = true
        return true
    }
}
