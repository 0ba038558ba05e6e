import Basics
import Foundation

/// Commits the engine's changes to its `StateStore` on one writer thread; callers never wait for
/// the disk. The engine marks what changed (`markDirty`, after recording the download's id) and
/// the writer takes the batch from `source` when a commit starts, so a burst of changes costs one
/// commit holding only the downloads that changed. Commits start at most every `minInterval`
/// seconds (timed by the injected `Scheduler`), except `flush()`, which commits at once and waits.
/// A failed commit's ids are retried with the next one (at the latest `retryInterval` later). A step
/// that must not come before its change is durable (deleting a file whose name a row may still
/// hold) waits with `whenDurable`. Never call `flush()` or `perform` while holding what `source` takes.
final class StateWriter: @unchecked Sendable {
    private let store: StateStore
    private let thread = WriterThread(name: "download-engine.state")
    private let minInterval: Double
    private let scheduler: Scheduler
    static let retryInterval: Double = 1
    private let lock = MonotonicCondition()
    // Guarded by `lock`.
    private var dirty = false
    /// Drains that took a batch, begun and ended (they run one at a time): `published` waits on them.
    private var pulled: UInt64 = 0
    private var pulledEnded: UInt64 = 0
    private var scheduled = false
    /// Monotonic seconds at which the last commit ended (nil: none yet).
    private var lastWriteEnd: Double?
    private var failure: StateStoreError?
    /// `whenDurable` actions, each with the first drain whose success makes it due.
    private var awaiting: [(ticket: UInt64, action: @Sendable () -> Void)] = []
    /// Test seam: runs before each commit; throwing fails it as the store would (nothing applied).
    private var gate: (@Sendable (StateBatch) throws(StateStoreError) -> Void)?
    /// The changes since the last batch, plus `retry` (the ids of a failed batch): taken under the
    /// engine's lock when a commit starts. Set once, before use.
    var source: (@Sendable (_ retry: Set<String>) -> StateBatch)?
    // Only the writer thread touches this.
    private var retry: Set<String> = []

    init(store: StateStore, minInterval: Double = 0, scheduler: Scheduler) {
        self.store = store
        self.minInterval = minInterval
        self.scheduler = scheduler
    }

    deinit { thread.stop() }

    /// The last commit error (nil once a commit succeeds).
    var lastError: StateStoreError? { lock.withLock { failure } }

    /// Told (on the writer thread) when commits start failing (the error) and when one succeeds
    /// again (nil): once per change, not per retry.
    private var healthHandler: (@Sendable (StateStoreError?) -> Void)?

    /// Sets the health handler; told at once when commits are failing already (start-up's did).
    func onHealthChange(_ handler: @escaping @Sendable (StateStoreError?) -> Void) {
        let failing = lock.withLock { () -> StateStoreError? in
            healthHandler = handler
            return failure
        }
        if let failing { handler(failing) }
    }

    /// Test seam: `gate` runs before each commit and fails it by throwing.
    func gateCommits(_ gate: (@Sendable (StateBatch) throws(StateStoreError) -> Void)?) {
        lock.withLock { self.gate = gate }
    }

    /// Runs `action` (on the writer thread, briefly: hand real work on) once everything decided
    /// before this call is committed: at once after the next commit, or after the retry that
    /// succeeds when commits fail. Never, when the process ends first.
    func whenDurable(_ action: @escaping @Sendable () -> Void) {
        lock.lock()
        awaiting.append((pulled + 1, action))
        dirty = true
        scheduleLocked(after: 0)
        lock.unlock()
    }

    /// The state changed: a commit follows, with a batch from `source` taken when it starts.
    func markDirty() {
        lock.lock()
        dirty = true
        scheduleLocked(after: 0)
        lock.unlock()
    }

    private func scheduleLocked(after delay: Double) {
        guard !scheduled else { return }
        scheduled = true
        let wait = max(delay, lastWriteEnd.map { $0 + minInterval - scheduler.monotonic() } ?? 0)
        if wait > 0 {
            scheduler.schedule(after: wait) { self.thread.async { self.drain() } }
        } else {
            thread.async { self.drain() }
        }
    }

    /// Writer thread. `force`: take a batch even when no change was marked (`flush`: the engine
    /// marks changes after releasing its lock, so a change may be decided but not marked yet).
    /// `unless`: a `publish` ticket already served by a drain that ended (nothing left to do).
    private func drain(force: Bool = false, unless served: UInt64 = .max) {
        lock.lock()
        if pulledEnded >= served {
            lock.unlock()
            return
        }
        let pull = (dirty || force || !retry.isEmpty) && source != nil
        dirty = false
        scheduled = false
        if pull { pulled += 1 }
        lock.unlock()
        guard pull, let source else { return }
        var due: [@Sendable () -> Void] = []
        defer {
            lock.lock()
            pulledEnded = pulled
            lock.broadcast()
            lock.unlock()
            for action in due { action() }
        }
        let batch = source(retry)
        retry = []
        guard !batch.isEmpty else {
            due = takeDue()
            return
        }
        var failed: StateStoreError?
        do throws(StateStoreError) {
            try lock.withLock { gate }?(batch)
            try store.commit(batch)
        } catch {
            failed = error
            retry = batch.ids
        }
        let end = scheduler.monotonic()
        lock.lock()
        lastWriteEnd = end
        let tell = (failure == nil) != (failed == nil) ? healthHandler : nil
        failure = failed
        if failed != nil { scheduleLocked(after: Self.retryInterval) }
        lock.unlock()
        tell?(failed)
        if failed == nil { due = takeDue() }
    }

    /// Writer thread, after a drain left nothing uncommitted: the `whenDurable` actions it made due.
    private func takeDue() -> [@Sendable () -> Void] {
        lock.lock()
        defer { lock.unlock() }
        let served = pulled
        let due = awaiting.filter { $0.ticket <= served }
        guard !due.isEmpty else { return [] }
        awaiting.removeAll { $0.ticket <= served }
        return due.map(\.action)
    }

    /// Commits everything marked or decided so far, now, and waits until it is on disk; false when
    /// that commit failed (`lastError` says why; it is retried).
    @discardableResult
    func flush() -> Bool {
        thread.sync {
            self.drain(force: true)
            return self.lock.withLock { self.failure == nil }
        }
    }

    /// Commits what was decided before this call, now, and waits (at most `timeout` seconds) until
    /// that commit ended; false when the wait timed out. Callers that come while a commit runs share
    /// the next one (a group commit): many at once cost a commit or two, not one each.
    @discardableResult
    func publish(timeout: Double) -> Bool {
        lock.lock()
        let ticket = pulled + 1  // The first drain to take a batch after now takes what was decided.
        lock.unlock()
        thread.async { self.drain(force: true, unless: ticket) }
        let deadline = MonotonicCondition.now() + timeout
        lock.lock()
        defer { lock.unlock() }
        while pulledEnded < ticket {
            if !lock.wait(until: deadline) { return pulledEnded >= ticket }
        }
        return true
    }

    /// `flush()`, then the store folds its WAL into its file: the engine's shutdown leaves one
    /// self-contained file.
    /// Returns the final commit's failure (nil: everything decided is committed; a failed fold
    /// loses nothing and is kept as `lastError` only).
    @discardableResult
    func finish() -> StateStoreError? {
        thread.sync {
            self.drain(force: true)
            let uncommitted = self.lock.withLock { self.failure }
            let failed: StateStoreError?
            do throws(StateStoreError) {
                try self.store.checkpoint()
                failed = nil
            } catch {
                failed = error
            }
            if let failed { self.lock.withLock { self.failure = failed } }
            return uncommitted
        }
    }

    /// Runs `body` with the store on the writer thread without waiting for it (start-up: the rows
    /// are read there while the start-up thread restores those read before).
    func start(_ body: @escaping @Sendable (StateStore) -> Void) {
        let store = self.store
        thread.async { body(store) }
    }

    /// Runs `body` with the store on the writer thread, and waits.
    func perform<T, E: Error>(_ body: @escaping (StateStore) throws(E) -> T) throws(E) -> T {
        let store = self.store
        return try thread.sync { () throws(E) -> T in try body(store) }
    }
}
