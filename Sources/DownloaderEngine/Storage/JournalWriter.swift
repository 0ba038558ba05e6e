import Basics
import Foundation
import Glibc

/// Writes journal snapshots on its own serial queue, newest wins: callers never wait for disk.
/// Two ways in: `submit` hands over a snapshot; `markDirty` (the engine's way) only says that state
/// changed, and the snapshot is taken from `source` when the write starts, so a burst of changes
/// costs one snapshot, not one per change. Writes start at most every `minInterval` seconds,
/// except `flush()`, which writes at once (the interval is timed by the injected `Scheduler`). Never
/// call `flush()` while holding what `source` takes.
final class JournalWriter: @unchecked Sendable {
    private let journal: StateJournal
    private let queue = DispatchQueue(label: "download-engine.journal")
    private let lock = NSLock()
    // Guarded by `lock`.
    private var pending: (generation: UInt64, entries: [JournalEntry])?
    private var dirty = false
    private var scheduled = false
    /// Monotonic seconds at which the last write ended (nil: none yet).
    private var lastWriteEnd: Double?
    /// The last write error, for diagnostics.
    private(set) var lastError: SystemError?
    /// The current state and its generation, taken on the writer's queue (pull mode). Set once, before use.
    var source: (@Sendable () -> (generation: UInt64, entries: [JournalEntry]))?
    private let minInterval: Double
    private let scheduler: Scheduler
    // Only the queue touches these.
    private var written: UInt64 = 0
    /// Crash tests: SIGKILL the process half-way through this write (1-based).
    private var crashAtWrite: Int?
    private var writes = 0

    init(journal: StateJournal, crashAtWrite: Int? = nil, minInterval: Double = 0,
         scheduler: Scheduler = SystemScheduler(label: "download-engine.journal-timer")) {
        self.journal = journal
        self.crashAtWrite = crashAtWrite
        self.minInterval = minInterval
        self.scheduler = scheduler
    }

    /// Queues `entries` (taken at `generation`); older pending snapshots are dropped.
    func submit(_ entries: [JournalEntry], generation: UInt64) {
        lock.lock()
        if (pending?.generation ?? 0) < generation { pending = (generation, entries) }
        scheduleLocked()
        lock.unlock()
    }

    /// The state changed: a write follows, with a snapshot from `source` taken when it starts.
    func markDirty() {
        lock.lock()
        dirty = true
        scheduleLocked()
        lock.unlock()
    }

    private func scheduleLocked() {
        guard !scheduled else { return }
        scheduled = true
        let wait = lastWriteEnd.map { $0 + minInterval - scheduler.monotonic() } ?? 0
        if wait > 0 {
            scheduler.schedule(after: wait) { self.queue.async { self.drain() } }
        } else {
            queue.async { self.drain() }
        }
    }

    /// `force`: take a snapshot from `source` even when no change was marked (`flush`: the engine
    /// marks changes after releasing its lock, so a change may be decided but not marked yet).
    private func drain(force: Bool = false) {
        lock.lock()
        var next = pending
        pending = nil
        let pull = dirty || force
        dirty = false
        scheduled = false
        lock.unlock()
        if pull, let source {
            let snapshot = source()
            if snapshot.generation > (next?.generation ?? 0) { next = snapshot }
        }
        guard let next, next.generation > written, let data = StateJournal.encode(next.entries) else { return }
        writes += 1
        let crash: (() -> Void)? = writes == crashAtWrite ? { _ = kill(getpid(), SIGKILL) } : nil
        do throws(SystemError) {
            try journal.write(data, midWrite: crash)
            written = next.generation
        } catch {
            lock.lock(); lastError = error; lock.unlock()
        }
        let end = scheduler.monotonic()
        lock.lock(); lastWriteEnd = end; lock.unlock()
    }

    /// Writes everything submitted, marked or decided so far, now, and waits until it is on disk.
    func flush() {
        queue.sync { self.drain(force: true) }
    }
}
