/// One subscriber's pending events and pacing, and what to do on each input. Pure:
/// `SubscriberQueue` calls one decision under its lock and carries out the returned `QueueAction`
/// after unlocking.
///
/// Progress is conflated: a newer progress replaces a pending one, and a lifecycle event (it
/// carries a newer snapshot) drops a pending progress before it, except the subscription's first
/// event (the current snapshot), which is always handed out. Lifecycle events queue up to
/// `lifecycleLimit` (beyond that the oldest non-terminal one is dropped). Pushing never blocks, so
/// a slow reader never slows a transfer.
///
/// With pacing (many subscribers) a waiting consumer is woken for progress at most once per its
/// spacing after the last event it was handed: a consumer that asks before its due time waits for
/// the tick at once (`deferred`), as does one a not-yet-due progress finds waiting, and the
/// pacer's tick hands over the download's newest progress when it is due. Lifecycle events always
/// wake the consumer at once.
///
/// The registry's progress (`offer`) reaches only a consumer that waits without a deferred
/// progress; any other reads the download's newest recorded progress (`RecordedProgress`) itself
/// when it asks, by version (`progressSeen`), so a progress visits none of the queues whose
/// consumer is busy writing or waits for the tick (`isParked`, `SubscriberParking`).
///
/// A consumer may run well after it was woken (10 000 streams on two cores): `settle` decides, when
/// it runs, what it is actually handed.
struct SubscriberQueueState: Sendable, Equatable {
    static let lifecycleLimit = 32

    /// Events not yet handed out, oldest first. (The properties change only through the decisions
    /// below; they are settable so that tests can write any state down.)
    var pending: [DownloadEvent] = []
    /// No more events are taken (terminal event, finish, cancel).
    var finished = false
    /// The consumer is suspended, waiting to be handed an event.
    var consumerWaits = false
    /// The consumer has been handed its first event.
    var started = false
    /// The version of the newest recorded progress handed out or queued here; a newer record is
    /// the consumer's to take when it asks (or the tick's to hand over).
    var progressSeen: UInt64 = 0
    var pacing: SubscriberPacing

    init(key: UInt64) {
        pacing = SubscriberPacing(key: key)
    }

    /// The registry's progress need not visit the queue (`SubscriberParking`): its consumer is
    /// busy (it reads the newest record when it asks), or waits for the pacer's tick, which hands
    /// the newest record when due (one offered after the due time but before the tick would wake
    /// it a tick earlier), or the queue has finished. Only a consumer that waits without a
    /// deferred progress is offered progress; it gets there only through `ask` and `tick`, which
    /// the registry decides under its lock.
    var isParked: Bool { !consumerWaits || pacing.deferred || finished }

    // MARK: Inputs

    /// An event for the subscriber; `pace` is nil for an unpaced queue.
    mutating func push(_ event: DownloadEvent, pace: ProgressPace?) -> QueueAction {
        guard !finished else { return QueueAction() }
        var action = QueueAction()
        if event.isTerminal {
            finished = true
            action.detach = true
        }
        guard consumerWaits else {
            enqueue(event)
            return action
        }
        if event.isProgress, let pace, !pacing.isDue(pace) {
            // Not copied here: when it is due the tick hands over the download's newest progress
            // (the registry records it before pushing).
            action.watchUntil = deferProgress()
        } else {
            wakeConsumer(pace)
            action.hand = .event(event)
        }
        return action
    }

    /// The registry's progress (`recorded`, already the download's newest record): a consumer that
    /// waits without a deferred progress is woken or deferred as by `push`; any other is left
    /// alone (a busy one takes the record when it asks, a deferred one gets it from the tick).
    mutating func offer(_ recorded: RecordedProgress, pace: ProgressPace?) -> QueueAction {
        guard consumerWaits, !finished else { return QueueAction() }
        let action = push(recorded.event, pace: pace)
        if action.handsSomething { progressSeen = max(progressSeen, recorded.version) }
        return action
    }

    /// The consumer asks for the next event (`cancelled`: its task is cancelled). `recorded`: the
    /// queue's progress comes from the registry's records (not pushed, as the relay does): then
    /// `newest`, the download's newest recorded progress, is queued first when this queue has not
    /// seen it, and a consumer that is not due yet waits for the tick at once. `hand` is what it
    /// gets at once; `.nothing` means it waits.
    mutating func ask(pace: ProgressPace?, cancelled: Bool, newest: RecordedProgress? = nil, recorded: Bool = true) -> QueueAction {
        if recorded, let newest, newest.version > progressSeen, !finished, !cancelled {
            progressSeen = newest.version
            enqueue(newest.event)
        }
        guard !pending.isEmpty else {
            if finished || cancelled { return QueueAction(hand: .end) }
            consumerWaits = true
            // Not due: the tick hands over the newest progress (if any) when it is, and no
            // progress needs to visit the queue before.
            if recorded, let pace, !pacing.isDue(pace) { return QueueAction(watchUntil: deferProgress()) }
            return QueueAction()
        }
        if let pace, !finished, pending.count == 1, pending[0].isProgress, !pacing.isDue(pace) {
            // A lone pending progress that is not due yet: the consumer waits for the tick.
            consumerWaits = true
            return QueueAction(watchUntil: deferProgress())
        }
        let event = pending.removeFirst()
        // An idle subscriber keeps no buffer storage (10 000 of them: ~3 MB).
        if pending.isEmpty { pending = [] }
        if let pace { pacing.delivered(pace) }
        return QueueAction(hand: .event(event))
    }

    /// The pacer's tick for a deferred progress: once due, the waiting consumer gets `newest` (the
    /// download's latest recorded progress) when it has not seen it, else the progress pending
    /// here; with neither it waits on undeferred (a progress is offered to it again); not yet due,
    /// watch again.
    mutating func tick(pace: ProgressPace, newest: RecordedProgress?) -> QueueAction {
        guard pacing.deferred, consumerWaits else {
            pacing.deferred = false
            return QueueAction()
        }
        guard pacing.isDue(pace) else { return QueueAction(watchUntil: pacing.dueAt) }
        let fresh = newest.flatMap { $0.version > progressSeen ? $0 : nil }
        guard let event = fresh?.event ?? pending.last.flatMap({ $0.isProgress ? $0 : nil }) else {
            pacing.deferred = false
            return QueueAction()
        }
        if let fresh { progressSeen = fresh.version }
        wakeConsumer(pace)
        return QueueAction(hand: .event(event))
    }

    /// Engine shutdown: a waiting consumer gets its deferred progress (`newest` when not seen yet,
    /// or the one pending here), if any, else the end. A consumer busy elsewhere still reads what
    /// is pending (bounded) and the newest progress it has not seen, then the end: a subscriber
    /// that had not read yet learns where its download stood.
    mutating func finish(newest: RecordedProgress?) -> QueueAction {
        var action = QueueAction(detach: !finished)
        finished = true
        if consumerWaits {
            consumerWaits = false
            let fresh = newest.flatMap { $0.version > progressSeen ? $0.event : nil }
            let deferred = pacing.deferred ? fresh ?? pending.first : nil
            action.hand = deferred.map { .event($0) } ?? .end
            pending = []
        } else if let fresh = newest, fresh.version > progressSeen {
            progressSeen = fresh.version
            enqueue(fresh.event)
        }
        pacing.deferred = false
        return action
    }

    /// The consumer was cancelled or went away: ends at once, dropping what is pending.
    mutating func cancel() -> QueueAction {
        var action = QueueAction(detach: !finished)
        finished = true
        pending = []
        pacing.deferred = false
        if consumerWaits {
            consumerWaits = false
            action.hand = .end
        }
        return action
    }

    /// The consumer runs with `handed` (what it was woken with, or handed at once) and gets the
    /// event returned. A progress is superseded by a lifecycle event that came in meanwhile (the
    /// lifecycle event is handed instead), except the subscription's first event, and replaced by
    /// `newest` (the download's latest progress) or a pending progress when only progress is
    /// pending: a consumer that runs late writes the newest snapshot (the same one as the
    /// download's other consumers), never a stale one, and never one older than a lifecycle event.
    mutating func settle(_ handed: DownloadEvent, newest: RecordedProgress?, pace: ProgressPace?) -> DownloadEvent {
        defer { started = true }
        guard handed.isProgress else { return handed }
        if started, let index = pending.firstIndex(where: { !$0.isProgress }) {
            let lifecycle = pending[index]
            pending.removeFirst(index + 1)
            if pending.isEmpty { pending = [] }
            if let pace { pacing.delivered(pace) }
            return lifecycle
        }
        guard pending.isEmpty || (pending.count == 1 && pending[0].isProgress) else { return handed }
        if let newest { progressSeen = max(progressSeen, newest.version) }
        let replacement = newest?.event ?? pending.first
        pending = []
        return replacement ?? handed
    }

    // MARK: Helpers

    /// A progress replaces a pending progress that nothing follows; a lifecycle event drops a
    /// pending progress before it (a newer snapshot), but not the subscription's first event.
    private mutating func enqueue(_ event: DownloadEvent) {
        if event.isProgress {
            if let last = pending.last, last.isProgress {
                pending[pending.count - 1] = event
            } else {
                pending.append(event)
            }
            return
        }
        if let last = pending.last, last.isProgress, started || pending.count > 1 {
            pending.removeLast()
        }
        pending.append(event)
        if pending.count(where: { !$0.isProgress }) > Self.lifecycleLimit,
           let index = pending.firstIndex(where: { !$0.isProgress && !$0.isTerminal }) {
            pending.remove(at: index)
        }
    }

    /// The waiting consumer is handed an event: whatever is pending is older than it.
    private mutating func wakeConsumer(_ pace: ProgressPace?) {
        pending = []
        consumerWaits = false
        pacing.deferred = false
        if let pace { pacing.delivered(pace) }
    }

    /// A not-yet-due progress waits for the tick: returns the due time when the pacer is to be
    /// told (the first time only).
    private mutating func deferProgress() -> UInt64? {
        guard !pacing.deferred else { return nil }
        pacing.deferred = true
        return pacing.dueAt
    }
}

/// What `SubscriberQueue` does after a decision, with its lock released.
struct QueueAction: Sendable, Equatable {
    enum Hand: Sendable, Equatable {
        /// The consumer is not handed anything (a waiting one keeps waiting).
        case nothing
        /// Resume the consumer with this event.
        case event(DownloadEvent)
        /// Resume the consumer with the end of the subscription.
        case end
    }

    var hand: Hand = .nothing
    /// Ask the pacer to tick this queue once this time (pacer clock) has come.
    var watchUntil: UInt64?
    /// The queue stops receiving: the registry forgets it (at most once per queue).
    var detach = false

    var handsSomething: Bool {
        if case .nothing = hand { false } else { true }
    }
}

extension DownloadEvent {
    var isProgress: Bool {
        if case .progress = self { true } else { false }
    }
}
