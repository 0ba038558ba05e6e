import Foundation
@testable import DownloaderEngine

/// A scheduler whose time moves only when the test says so. `advance` runs every timer that falls
/// due, in deadline order (ties in scheduling order), on the calling thread, without its lock held.
/// `waitForTimers` lets a test wait (cancellation-aware, so under `withTimeout`) until work running
/// on other threads has scheduled what the test is about to make due.
final class ManualScheduler: Scheduler, @unchecked Sendable {
    private struct Entry {
        var deadline: Double
        var sequence: UInt64
        var timer: ScheduledTimer
        var work: @Sendable () -> Void
    }

    private let lock = NSLock()
    private var time: Double = 1000
    private var entries: [Entry] = []
    private var sequence: UInt64 = 0
    private var waiters: [(key: Int, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextWaiter = 0

    func monotonic() -> Double { lock.withLock { time } }

    func now() -> Date { Date(timeIntervalSince1970: 1_800_000_000 + monotonic()) }

    @discardableResult
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let timer = ScheduledTimer()
        lock.lock()
        sequence += 1
        entries.append(Entry(deadline: time + max(0, seconds), sequence: sequence, timer: timer, work: work))
        let pending = entries.count { !$0.timer.isCancelled }
        let ready = waiters.filter { $0.count <= pending }
        waiters.removeAll { $0.count <= pending }
        lock.unlock()
        ready.forEach { $0.continuation.resume() }
        return timer
    }

    /// Timers scheduled and neither run nor cancelled.
    var pendingCount: Int { lock.withLock { entries.count { !$0.timer.isCancelled } } }

    /// Seconds from now until the earliest pending timer, if any.
    var nextDelay: Double? {
        lock.withLock {
            entries.filter { !$0.timer.isCancelled }.map(\.deadline).min().map { $0 - time }
        }
    }

    /// Moves time forward by `seconds`, running every timer that falls due (also those that due
    /// work schedules within the interval), each at its own deadline.
    func advance(_ seconds: Double) {
        let end = lock.withLock { time + max(0, seconds) }
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

    private func takeNextDue(before end: Double) -> Entry? {
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

    /// Waits until at least `count` timers are pending (returns early when the task is cancelled).
    func waitForTimers(_ count: Int = 1) async {
        let key = lock.withLock {
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                lock.lock()
                if entries.count(where: { !$0.timer.isCancelled }) >= count || Task.isCancelled {
                    lock.unlock()
                    c.resume()
                } else {
                    waiters.append((key, count, c))
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
