import Foundation

/// One subscriber's pending events. Progress is conflated (a newer progress replaces a pending one);
/// lifecycle events queue up to `lifecycleLimit` (beyond that the oldest non-terminal one is
/// dropped). Pushing never blocks, so a slow reader never slows a transfer.
///
/// With a `ProgressPacer` (many subscribers) a waiting consumer is woken for progress at most once
/// per the pacer's interval after the last event it was handed (a lifecycle event carries a
/// snapshot too, so 10 000 streams woken by `resumed` do not all want a progress right after): a progress that is not yet due stays pending and the pacer delivers
/// the download's newest one when it is. Lifecycle events always wake the consumer at once (a pending
/// progress before one is dropped: the lifecycle event carries a newer snapshot).
final class SubscriberQueue: @unchecked Sendable {
    static let lifecycleLimit = 32

    let id: UInt64
    let downloadID: String
    /// The engine's event sequence number when the queue was made: its first element already
    /// reflects every event up to it, so those are not delivered again (`SubscriberRegistry.publish`).
    let startSequence: UInt64
    private let lock = NSLock()
    private var buffer: [DownloadEvent] = []
    private var finished = false
    private var waiter: CheckedContinuation<DownloadEvent?, Never>?
    /// Called once when the queue stops receiving (terminal event, cancel, shutdown, deinit).
    private var onDetach: (@Sendable (UInt64) -> Void)?
    private let pacer: ProgressPacer?
    /// Pacing: the earliest time (pacer clock) the next progress may wake the consumer.
    private var progressDueAt: UInt64 = 0
    /// Pacing: progress deliveries so far (varies the spacing between them).
    private var progressDeliveries: UInt64 = 0
    /// Pacing: the consumer waits while a not-yet-due progress is pending; the pacer knows.
    private var deferred = false

    init(id: UInt64, downloadID: String = "", startSequence: UInt64 = 0, pacer: ProgressPacer? = nil,
         onDetach: @escaping @Sendable (UInt64) -> Void) {
        self.id = id
        self.downloadID = downloadID
        self.startSequence = startSequence
        self.pacer = pacer
        self.onDetach = onDetach
    }

    /// Delivers `event`; returns false when the queue no longer accepts events.
    @discardableResult
    func push(_ event: DownloadEvent) -> Bool {
        lock.lock()
        guard !finished else { lock.unlock(); return false }
        if event.isTerminal { finished = true }
        var deliver: CheckedContinuation<DownloadEvent?, Never>?
        var deferNow = false
        let dueAt = progressDueAt
        if let w = waiter {
            if Self.isProgress(event), let pacer, !progressIsDue(pacer) {
                // Stays pending without a copy here: when it is due the pacer delivers the
                // download's newest progress (the registry records it before pushing).
                deferNow = !deferred
                deferred = true
            } else {
                // Whatever is pending is a progress older than `event`: drop it.
                buffer.removeAll()
                deferred = false
                waiter = nil
                deliver = w
                if let pacer { progressDelivered(pacer) }  // a lifecycle event carries a snapshot too
            }
        } else {
            enqueue(event)
        }
        let detach = finished ? takeDetach() : nil
        lock.unlock()
        deliver?.resume(returning: event)
        if deferNow { pacer?.watch(self, dueAt: dueAt) }
        detach?(id)
        return true
    }

    /// `push` of a progress event at `now` (pacer clock), the registry's hot path.
    func pushProgress(_ event: DownloadEvent, now: UInt64) {
        lock.lock()
        guard !finished else { lock.unlock(); return }
        guard let w = waiter else {
            enqueue(event)
            lock.unlock()
            return
        }
        if let pacer, progressDueAt != 0, now < progressDueAt {
            // Stays pending without a copy here: when it is due the pacer delivers the
            // download's newest progress (the registry records it before pushing).
            deferUntilDueAndUnlock(pacer)
            return
        }
        buffer.removeAll()
        deferred = false
        waiter = nil
        if let pacer { progressDelivered(pacer) }
        lock.unlock()
        w.resume(returning: event)
    }

    private static func isProgress(_ event: DownloadEvent) -> Bool {
        if case .progress = event { return true } else { return false }
    }

    /// A progress replaces a pending progress that nothing follows; lifecycle events queue up.
    /// The first element (the current snapshot) therefore stays first.
    private func enqueue(_ event: DownloadEvent) {
        if Self.isProgress(event), let last = buffer.last, Self.isProgress(last) {
            buffer[buffer.count - 1] = event
            return
        }
        buffer.append(event)
        guard !Self.isProgress(event) else { return }
        let lifecycle = buffer.count { !Self.isProgress($0) }
        if lifecycle > Self.lifecycleLimit,
           let index = buffer.firstIndex(where: { !Self.isProgress($0) && !$0.isTerminal }) {
            buffer.remove(at: index)
            // Two progress events now adjacent: keep the newer.
            if index > 0, index < buffer.count, Self.isProgress(buffer[index - 1]), Self.isProgress(buffer[index]) {
                buffer.remove(at: index - 1)
            }
        }
    }

    // MARK: Pacing (under `lock`)

    /// Leaves the pending progress for the pacer, which is told to watch this queue (once) until
    /// the progress is due. Called with `lock` held; returns with it released.
    private func deferUntilDueAndUnlock(_ pacer: ProgressPacer) {
        let watchNow = !deferred
        deferred = true
        let dueAt = progressDueAt
        lock.unlock()
        if watchNow { pacer.watch(self, dueAt: dueAt) }
    }

    private func progressIsDue(_ pacer: ProgressPacer) -> Bool {
        progressDueAt == 0 || pacer.now() >= progressDueAt
    }

    private func progressDelivered(_ pacer: ProgressPacer) {
        progressDeliveries &+= 1
        let spacing = pacer.spacing(queue: id, delivery: progressDeliveries)
        progressDueAt = spacing == 0 ? 0 : pacer.now() &+ spacing
    }

    /// Called by the pacer: once due, delivers the download's newest progress (or the one pending
    /// here) to the waiting consumer. Returns the due time when it is not due yet (watch again).
    func deliverIfDue() -> UInt64? {
        lock.lock()
        guard deferred, let w = waiter, let pacer else {
            deferred = false
            lock.unlock()
            return nil
        }
        guard progressIsDue(pacer) else {
            let due = progressDueAt
            lock.unlock()
            return due
        }
        let pending = buffer.last.flatMap { Self.isProgress($0) ? $0 : nil }
        guard let event = pacer.latestProgress(of: downloadID) ?? pending else {
            deferred = false
            lock.unlock()
            return nil
        }
        buffer.removeAll()
        deferred = false
        waiter = nil
        progressDelivered(pacer)
        lock.unlock()
        w.resume(returning: event)
        return nil
    }

    private func takeDetach() -> (@Sendable (UInt64) -> Void)? {
        let d = onDetach
        onDetach = nil
        return d
    }

    /// Ends the stream after the already-buffered events (engine shutdown).
    func finish() {
        lock.lock()
        finished = true
        let w = waiter
        waiter = nil
        var pending: DownloadEvent?
        if w != nil, deferred {  // a deferred progress
            pending = pacer?.latestProgress(of: downloadID) ?? (buffer.isEmpty ? nil : buffer.removeFirst())
        }
        buffer.removeAll()
        deferred = false
        let detach = takeDetach()
        lock.unlock()
        w?.resume(returning: pending)
        detach?(id)
    }

    /// Ends the stream at once, dropping buffered events (consumer cancelled or went away).
    func cancel() {
        lock.lock()
        finished = true
        buffer.removeAll()
        deferred = false
        let w = waiter
        waiter = nil
        let detach = takeDetach()
        lock.unlock()
        w?.resume(returning: nil)
        detach?(id)
    }

    /// The next event, waiting when none is pending; nil at the end.
    func next() async -> DownloadEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<DownloadEvent?, Never>) in
                lock.lock()
                if !buffer.isEmpty {
                    // A lone pending progress that is not due yet waits for the pacer.
                    if let pacer, !finished, buffer.count == 1, Self.isProgress(buffer[0]), !progressIsDue(pacer) {
                        waiter = continuation
                        deferUntilDueAndUnlock(pacer)
                        return
                    }
                    let event = buffer.removeFirst()
                    // An idle subscriber keeps no buffer storage (10 000 of them: ~3 MB).
                    if buffer.isEmpty { buffer = [] }
                    if let pacer { progressDelivered(pacer) }
                    lock.unlock()
                    continuation.resume(returning: event)
                } else if finished || Task.isCancelled {
                    lock.unlock()
                    continuation.resume(returning: nil)
                } else {
                    waiter = continuation
                    lock.unlock()
                }
            }
        } onCancel: {
            self.cancel()
        }
    }

    /// For a consumer about to write a progress event it took from `next()`: the newest progress
    /// of the download, when nothing but progress is pending here (so no lifecycle event came in
    /// between); a pending progress is dropped, the newest replaces it. With many streams on one
    /// loop a consumer runs late, and writing the newest progress means every stream writes the
    /// same event (one shared encoding) and none writes a stale one. Nil: keep the event.
    func newestProgress() -> DownloadEvent? {
        let newest = pacer?.latestProgress(of: downloadID)
        lock.lock(); defer { lock.unlock() }
        guard waiter == nil, buffer.isEmpty || (buffer.count == 1 && Self.isProgress(buffer[0])) else { return nil }
        if let newest {
            buffer.removeAll()
            return newest
        }
        guard !buffer.isEmpty else { return nil }
        defer { buffer = [] }
        return buffer[0]
    }

    /// A lifecycle event is pending: a progress in the consumer's hand is older than its snapshot.
    var hasPendingLifecycleEvent: Bool {
        lock.lock(); defer { lock.unlock() }
        return buffer.contains { !Self.isProgress($0) }
    }

    /// The consumer is suspended in `next()` (for tests).
    var isConsumerWaiting: Bool {
        lock.lock(); defer { lock.unlock() }
        return waiter != nil
    }

    var pendingCount: Int {
        lock.lock(); defer { lock.unlock() }
        return buffer.count
    }
}

extension DownloadSubscription {
    /// For a consumer about to write a progress event: the download's newest progress when only
    /// progress is pending for this subscription (it replaces the pending one); nil to keep the
    /// event in hand. Lets a consumer that fell behind write the newest snapshot, not an old one.
    public func newestProgress() -> DownloadEvent? {
        queue.newestProgress()
    }

    /// A lifecycle event (carrying a newer snapshot) is waiting: a consumer holding a progress
    /// event may skip it, as progress is conflated anyway.
    public var hasPendingLifecycleEvent: Bool {
        queue.hasPendingLifecycleEvent
    }
}
