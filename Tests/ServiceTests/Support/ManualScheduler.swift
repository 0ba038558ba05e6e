import Foundation
@testable import DownloaderEngine

/// A scheduler whose time moves only when the test says so. `advance` runs every timer that falls
/// due, in deadline order (ties in scheduling order), on the calling thread, without its lock held.
/// Time is kept in whole nanoseconds, so steps of 0.05 s add up exactly.
/// `waitForTimers` lets a test wait (cancellation-aware, so under `withTimeout`) until work running
/// on other threads has scheduled what the test is about to make due.
final class ManualScheduler: Scheduler, @unchecked Sendable {
    private struct Entry {
        var deadline: Int64
        var sequence: UInt64
        var timer: ScheduledTimer
        var work: @Sendable () -> Void
    }

    private let lock = NSLock()
    private var time: Int64 = 1_000_000_000_000  // 1000 s
    private var entries: [Entry] = []
    private var sequence: UInt64 = 0
    /// Waiting tests: each until `ready` says the pending timers' delays from now are what it waits for.
    private var waiters: [(key: Int, ready: ([Double]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextWaiter = 0

    private static func nanoseconds(_ seconds: Double) -> Int64 { Int64((seconds * 1e9).rounded()) }

    func monotonic() -> Double { lock.withLock { Double(time) / 1e9 } }

    /// Seconds the wall clock was stepped by (`stepWall`): `now()` moves, `monotonic()` does not.
    private var wallStep: Double = 0

    func now() -> Date { lock.withLock { Date(timeIntervalSince1970: 1_800_000_000 + wallStep + Double(time) / 1e9) } }

    /// Steps the wall clock alone (NTP or `date -s`), as a host's clock can be: no timer falls due.
    func stepWall(_ seconds: Double) {
        lock.withLock { wallStep += seconds }
    }

    @discardableResult
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let timer = ScheduledTimer()
        lock.lock()
        sequence += 1
        entries.append(Entry(deadline: time + max(0, Self.nanoseconds(seconds)), sequence: sequence, timer: timer, work: work))
        let delays = pendingDelays()
        let ready = waiters.filter { $0.ready(delays) }
        waiters.removeAll { $0.ready(delays) }
        lock.unlock()
        ready.forEach { $0.continuation.resume() }
        return timer
    }

    /// Timers scheduled and neither run nor cancelled.
    var pendingCount: Int { lock.withLock { entries.count { !$0.timer.isCancelled } } }

    /// Seconds from now until the earliest pending timer, if any.
    var nextDelay: Double? {
        lock.withLock {
            entries.filter { !$0.timer.isCancelled }.map(\.deadline).min().map { Double($0 - time) / 1e9 }
        }
    }

    /// Moves time forward by `seconds`, running every timer that falls due (also those that due
    /// work schedules within the interval), each at its own deadline.
    func advance(_ seconds: Double) {
        let end = lock.withLock { time + max(0, Self.nanoseconds(seconds)) }
        while let entry = takeNextDue(before: end) {
            if !entry.timer.isCancelled { entry.work() }
        }
        lock.withLock { time = max(time, end) }
    }

    /// Moves time to the earliest pending timer and runs everything due then; false when none is pending.
    @discardableResult
    func runNext() -> Bool {
        guard let delay = nextDelay else { return false }
        advance(max(0, delay))
        return true
    }

    private func takeNextDue(before end: Int64) -> Entry? {
        lock.lock()
        defer { lock.unlock() }
        entries.removeAll { $0.timer.isCancelled }
        guard let index = entries.indices.min(by: {
            (entries[$0].deadline, entries[$0].sequence) < (entries[$1].deadline, entries[$1].sequence)
        }), entries[index].deadline <= end else { return nil }
        let entry = entries.remove(at: index)
        time = max(time, entry.deadline)
        return entry
    }

    /// Under `lock`: seconds from now to each pending timer.
    private func pendingDelays() -> [Double] {
        entries.filter { !$0.timer.isCancelled }.map { Double($0.deadline - time) / 1e9 }
    }

    /// Waits until at least `count` timers are pending (returns early when the task is cancelled).
    func waitForTimers(_ count: Int = 1) async {
        await waitUntil { $0.count >= count }
    }

    /// Waits until a timer due `seconds` from now is pending (the retry, say, that another thread
    /// decides), so the test can then move time to just before and just after it.
    func waitForTimer(dueIn seconds: Double) async {
        await waitUntil { $0.contains { abs($0 - seconds) < 1e-6 } }
    }

    private func waitUntil(_ ready: @escaping ([Double]) -> Bool) async {
        let key = lock.withLock {
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                lock.lock()
                if ready(pendingDelays()) || Task.isCancelled {
                    lock.unlock()
                    c.resume()
                } else {
                    waiters.append((key, ready, c))
                    lock.unlock()
                }
            }
        } onCancel: {
            let mine = lock.withLock {
                defer { waiters.removeAll { $0.key == key } }
                return waiters.filter { $0.key == key }
            }
            mine.forEach { $0.continuation.resume() }
        }
    }
}

/// Randomness that always says the same: retry jitter at a known point (`unit`), ids from a counter.
final class FixedRandom: RandomSource, @unchecked Sendable {
    private let lock = NSLock()
    private var counter: UInt8 = 0
    let fixedUnit: Double

    init(unit: Double) {
        fixedUnit = unit
    }

    func bytes(_ count: Int) -> [UInt8] {
        lock.withLock {
            counter &+= 1
            return [UInt8](repeating: counter, count: count)
        }
    }

    func unit() -> Double { fixedUnit }
}

/// The real clock with short waits compressed: timers of at most `threshold` seconds run at once
/// (in order, on a queue of their own), longer ones (the shutdown bound) after their real delay. For
/// tests that care about what retries, trailing progress and journal batching do, not about how long
/// they wait; dates and rates stay real.
struct EagerScheduler: Scheduler {
    let threshold: Double
    private let clock = SystemClock()
    private let queue = DispatchQueue(label: "eager-scheduler")

    init(upTo threshold: Double = 1) {
        self.threshold = threshold
    }

    func monotonic() -> Double { clock.monotonic() }

    func now() -> Date { clock.now() }

    @discardableResult
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let timer = ScheduledTimer()
        let run: @Sendable () -> Void = { if !timer.isCancelled { work() } }
        if seconds <= threshold {
            queue.async(execute: run)
        } else {
            queue.asyncAfter(deadline: .now() + seconds, execute: run)
        }
        return timer
    }
}
