import Basics
import Glibc
import Synchronization

/// Asks the bulk loops (`ServerConfiguration.bulkLoopCount`) to give way to the application's own
/// work for a while: the application calls `request` (from any thread) when its work waits for a
/// CPU, and while a request holds, each bulk loop keeps at most `share` of one core: after each
/// millisecond of its own CPU time it sleeps for as long as the share leaves (`DutyCycle`).
///
/// Why not a scheduling policy: a lower nice value leaves a waking thread queued behind a loop
/// that is in the middle of a `sendfile`, and `SCHED_IDLE`, which does preempt, is inherited by
/// every thread the loop starts (a libdispatch worker spawned when it queues work) and cannot be
/// left without privilege. A loop that sleeps gives the cores back at once and starts nothing.
/// Between requests the loops run unhindered, so bodies go out at full speed whenever the
/// application's work does not need the cores.
public final class BulkLoopYield: Sendable {
    /// The share of one core a bulk loop keeps while asked to give way (`DutyCycle` holds it to
    /// 0.01...1).
    public let share: Double
    /// Monotonic nanoseconds until which the loops give way (0: never asked).
    private let until = Atomic<UInt64>(0)
    /// Stands in for `nanosleep` (tests).
    let sleep: @Sendable (UInt64) -> Void
    /// Stands in for the calling thread's CPU clock in nanoseconds (tests).
    let threadCPU: @Sendable () -> UInt64

    public convenience init(share: Double) {
        self.init(share: share, sleep: Self.nanosleep, threadCPU: threadCPUNanoseconds)
    }

    init(share: Double, sleep: @escaping @Sendable (UInt64) -> Void, threadCPU: @escaping @Sendable () -> UInt64) {
        self.share = share
        self.sleep = sleep
        self.threadCPU = threadCPU
    }

    /// Any thread: the loops give way for the next `seconds` (a later request extends it).
    public func request(seconds: Double) {
        let deadline = monotonicNanoseconds() &+ UInt64(max(0, seconds) * 1e9)
        var current = until.load(ordering: .relaxed)
        while current < deadline {
            let (exchanged, original) = until.compareExchange(expected: current, desired: deadline, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Whether a request holds at monotonic time `now`.
    func isRequested(at now: UInt64) -> Bool {
        now < until.load(ordering: .relaxed)
    }

    static let nanosleep: @Sendable (UInt64) -> Void = { nanoseconds in
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while Glibc.nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}

/// How long a loop that gives way sleeps, from its own CPU time. Pure: after `busy` nanoseconds of
/// CPU since its last rest, it rests long enough that `busy` is `share` of the whole.
struct DutyCycle: Equatable {
    /// CPU time a loop runs between rests.
    static let busy: UInt64 = 1_000_000
    let rest: UInt64
    /// The loop's CPU time when it last rested, or when it was last asked after not being asked.
    private(set) var mark: UInt64?

    init(share: Double) {
        let share = min(max(share, 0.01), 1)
        rest = UInt64((Double(Self.busy) * (1 - share) / share).rounded())
    }

    /// After a piece of the loop's work: `asked` whether a request holds, `cpu` the loop's CPU time
    /// (read only when asked). Returns how long to sleep now, if at all; `rested(cpu:)` after it.
    mutating func step(asked: Bool, cpu: () -> UInt64) -> UInt64? {
        guard asked, rest > 0 else {
            mark = nil
            return nil
        }
        let now = cpu()
        guard let mark else {
            self.mark = now
            return nil
        }
        return now &- mark >= Self.busy ? rest : nil
    }

    /// The loop slept: its next `busy` nanoseconds count from `cpu`.
    mutating func rested(cpu: UInt64) {
        mark = cpu
    }
}
