import Foundation
import Synchronization

/// One subscriber's queue of events: what is pending and what to do decides
/// `SubscriberQueueState` (pure); this class holds the lock, the waiting consumer's continuation
/// and the detach callback. Every input goes the same way: lock, decide, unlock, act (resume the
/// consumer, have the pacer watch, detach).
final class SubscriberQueue: @unchecked Sendable {
    static var lifecycleLimit: Int { SubscriberQueueState.lifecycleLimit }

    /// Who waits for the next event: a task suspended in `next()`, or a poller (`poll`) to wake.
    enum Consumer {
        case task(CheckedContinuation<DownloadEvent?, Never>)
        case poller(@Sendable () -> Void)
    }

    typealias Detach = @Sendable (UInt64) -> Void

    /// What `poll` found.
    enum Polled: Equatable {
        case event(DownloadEvent)
        /// Nothing yet: the waker is called once there is.
        case wait
        case end
    }

    let id: UInt64
    let downloadID: String
    /// The engine's event sequence number when the queue was made: its first element already
    /// reflects every event up to it, so those are not delivered again (`SubscriberRegistry.publish`).
    /// `SubscriptionRelay.relayed` once the relay feeds the queue (from the start, or handed over).
    var startSequence: UInt64 { start.load(ordering: .acquiring) }
    private let start: Atomic<UInt64>
    private let pacer: ProgressPacer?
    private let lock = NSLock()
    private var state: SubscriberQueueState
    private var consumer: Consumer?
    /// What was handed to a poller while it was not looking; it takes it at its next `poll`.
    private var handedToPoller: QueueAction.Hand?
    /// Called once when the queue stops receiving (terminal event, cancel, shutdown, deinit).
    private var onDetach: Detach?
    /// The registry that keeps the queue parked while its consumer waits for the tick (set once,
    /// before the queue is shared).
    weak var registry: SubscriberRegistry?

    init(id: UInt64, downloadID: String = "", startSequence: UInt64 = 0, pacer: ProgressPacer? = nil,
         onDetach: @escaping Detach) {
        self.id = id
        self.downloadID = downloadID
        start = Atomic(startSequence)
        self.pacer = pacer
        self.onDetach = onDetach
        state = SubscriberQueueState(key: id)
    }

    /// The engine's events reach the queue no more: the relay feeds it from now on (`SubscriptionRelay.handOver`).
    func markRelayed() {
        start.store(SubscriptionRelay.relayed, ordering: .releasing)
    }

    /// Delivers `event` (nothing once the queue has finished). `pace`: the pacer's, when the caller
    /// took it already (the registry, once per publish); read from the pacer otherwise. Returns
    /// whether the queue is parked afterwards (`SubscriberQueueState.isParked`).
    @discardableResult
    func push(_ event: DownloadEvent, pace: ProgressPace? = nil) -> Bool {
        let pace = pacer.map { pace ?? $0.pace() }
        return apply { $0.push(event, pace: pace) }
    }

    /// The registry's progress, recorded as the download's newest first (see
    /// `SubscriberQueueState.offer`). Returns whether the queue is parked afterwards. Called with
    /// the registry's lock held.
    func offer(_ recorded: RecordedProgress, pace: ProgressPace) -> Bool {
        apply { $0.offer(recorded, pace: pace) }
    }

    /// Decides under the lock, acts after it; returns whether the queue is parked afterwards.
    private func apply(_ decide: (inout SubscriberQueueState) -> QueueAction) -> Bool {
        lock.lock()
        let action = decide(&state)
        let parked = state.isParked
        let (consumer, detach) = take(for: action)
        lock.unlock()
        act(action, consumer, detach)
        return parked
    }

    /// Called by the pacer when this queue's deferred progress may be due. Decided with the
    /// registry's lock held (see `SubscriberParking`).
    func tick() {
        guard let pacer else { return }
        let pace = pacer.pace()
        let decide = { () -> ((QueueAction, Consumer?, Detach?), parked: Bool) in
            let newest = self.newest()
            self.lock.lock()
            defer { self.lock.unlock() }
            let action = self.state.tick(pace: pace, newest: newest)
            let (consumer, detach) = self.take(for: action)
            return ((action, consumer, detach), self.state.isParked)
        }
        let (action, consumer, detach) = registry.map { $0.deciding(self, decide) } ?? decide().0
        act(action, consumer, detach)
    }

    /// The download's newest recorded progress, unless this queue's first element already reflects
    /// it (recorded by an engine event decided before the subscription); any record for a queue
    /// the relay feeds.
    private func newest() -> RecordedProgress? {
        guard let record = pacer?.latestRecord(of: downloadID) else { return nil }
        let start = startSequence
        return start == SubscriptionRelay.relayed || record.sequence > start ? record : nil
    }

    /// Ends the stream (engine shutdown): a waiting consumer gets its deferred progress first, a
    /// busy one the lifecycle events pending.
    func finish() {
        let newest = newest()
        lock.lock()
        let action = state.finish(newest: newest)
        let (consumer, detach) = take(for: action)
        lock.unlock()
        act(action, consumer, detach)
    }

    /// Ends the stream at once, dropping pending events (consumer cancelled or went away).
    func cancel() {
        lock.lock()
        let action = state.cancel()
        let (consumer, detach) = take(for: action)
        lock.unlock()
        act(action, consumer, detach)
    }

    /// The next event, waiting when none is pending; nil at the end. What is handed out is settled
    /// when the consumer actually runs (see `SubscriberQueueState.settle`).
    func next() async -> DownloadEvent? {
        settle(await handed())
    }

    private func handed() async -> DownloadEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<DownloadEvent?, Never>) in
                ask(.task(continuation))
            }
        } onCancel: {
            self.cancel()
        }
    }

    private func ask(_ asking: Consumer) {
        let action = decideAsk(waiting: asking, cancelled: Task.isCancelled)
        act(action, action.handsSomething ? asking : nil, nil)
    }

    /// The consumer's ask, decided with the registry's lock held (when the queue has a registry):
    /// it reads the newest recorded progress and, when it waits for a progress, becomes one that
    /// progress visits, with no progress recorded in between (see `SubscriberParking`).
    private func decideAsk(waiting: Consumer, cancelled: Bool) -> QueueAction {
        let pace = pacer?.pace()
        let decide = { () -> (QueueAction, parked: Bool) in
            // The relay pushes its progress to the queues it feeds (and records it only for the tick).
            let recorded = self.startSequence != SubscriptionRelay.relayed
            let newest = recorded ? self.newest() : nil
            self.lock.lock()
            defer { self.lock.unlock() }
            // A poller's hand stored since it last looked (a push handed it one meanwhile) is what it
            // gets: asking instead would wait again, and the next push's hand would replace it.
            if case .poller = waiting, let stored = self.handedToPoller {
                self.handedToPoller = nil
                return (QueueAction(hand: stored), self.state.isParked)
            }
            let action = self.state.ask(pace: pace, cancelled: cancelled, newest: newest, recorded: recorded)
            if !action.handsSomething { self.consumer = waiting }
            return (action, self.state.isParked)
        }
        return registry.map { $0.deciding(self, decide) } ?? decide().0
    }

    /// The next event without waiting, for a consumer driven from elsewhere (an event loop): when
    /// there is none yet, `waker` is called (once, on whatever thread delivers) as soon as there is,
    /// and the next `poll` takes it. What is handed out is settled as in `next()`.
    func poll(waker: @escaping @Sendable () -> Void) -> Polled {
        lock.lock()
        var hand = handedToPoller
        handedToPoller = nil
        lock.unlock()
        if hand == nil {
            let action = decideAsk(waiting: .poller(waker), cancelled: false)
            act(action, nil, nil)
            hand = action.hand
        }
        switch hand {
        case .nothing?, nil: return .wait
        case .end?: return .end
        case .event(let event)?:
            // A progress superseded meanwhile is skipped: ask again (the next one, or a wait with the waker set).
            guard let settled = settle(event) else { return poll(waker: waker) }
            return .event(settled)
        }
    }

    /// Not inlined: its temporaries stay out of the async frame every idle consumer keeps.
    @inline(never)
    private func settle(_ handed: DownloadEvent?) -> DownloadEvent? {
        guard let handed else { return nil }
        let progress = handed.isProgress
        let newest = progress ? newest() : nil
        let pace = progress ? pacer?.pace() : nil
        lock.lock()
        defer { lock.unlock() }
        return state.settle(handed, newest: newest, pace: pace)
    }

    // MARK: Acting (the lock released)

    /// Under the lock: the waiting consumer when `action` hands it something, the detach callback
    /// when the queue detaches.
    private func take(for action: QueueAction) -> (Consumer?, Detach?) {
        var taken: (Consumer?, Detach?) = (nil, nil)
        if action.handsSomething {
            taken.0 = consumer
            consumer = nil
            // A poller's hand is stored here, under the lock that took the poller: a `poll` between
            // this and the waker's call finds it (it never finds the slot empty and asks again,
            // after which a second hand would overwrite this one).
            if case .poller? = taken.0 { handedToPoller = action.hand }
        }
        if action.detach {
            taken.1 = onDetach
            onDetach = nil
        }
        return taken
    }

    /// Detaches first: a consumer that has been handed the end is no longer counted.
    private func act(_ action: QueueAction, _ consumer: Consumer?, _ detach: Detach?) {
        detach?(id)
        switch (action.hand, consumer) {
        case (.nothing, _), (_, nil): break
        case (.event(let event), .task(let task)?): task.resume(returning: event)
        case (.end, .task(let task)?): task.resume(returning: nil)
        case (_, .poller(let waker)?):
            waker()  // Its hand was stored by `take(for:)`.
        }
        if let due = action.watchUntil { pacer?.watch(self, dueAt: due) }
    }

    // MARK: For tests

    /// The consumer is suspended in `next()`.
    var isConsumerWaiting: Bool {
        lock.lock()
        defer { lock.unlock() }
        return state.consumerWaits
    }

    var pendingCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return state.pending.count
    }
}
