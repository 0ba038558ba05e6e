import Foundation

/// Where a relay reads the rows it follows (`ClusterReader`; tests give their own).
protocol RelaySource: Sendable {
    func rows(ids: [String]) throws(StateStoreError) -> [String: ClusterRow]
    /// Who removed each of `ids` that has a tombstone (read after their rows were found gone).
    func removers(of ids: [String]) throws(StateStoreError) -> [String: RemovalCause]
}

extension ClusterReader: RelaySource {
    func removers(of ids: [String]) throws(StateStoreError) -> [String: RemovalCause] {
        try pool.withConnection { db throws(StateStoreError) in try PostgresStateStore.removers(of: ids, db) }
    }
}

/// Cluster mode: subscriptions to downloads this replica does not hold, fed from the database. One
/// timer per engine (on the engine's scheduler) polls the rows of every followed download every
/// `interval` seconds in one statement (`ClusterReader.rows`), on a queue of its own (never the
/// scheduler's), and publishes what changed (`RelayDiff`) to the download's relayed queues; a
/// terminal event ends them as usual, a row that disappeared ends them with `removed`, by whom its
/// tombstone says (written in the deletion's transaction, so read after the row was found gone it
/// is there). The holder's
/// heartbeat keeps the row at most a second behind, so a subscriber anywhere gets progress at least
/// once a second. A lost database publishes nothing until it answers again (the streams stay open).
///
/// Polling rather than `LISTEN`/`NOTIFY`: a notification would still have to be followed by reading
/// the row, a listening connection is one more per replica outside the pool's bound that has to be
/// watched and re-established after every database restart (notifications sent meanwhile are lost,
/// so a poll would be needed anyway), and heartbeats (a row write per download per second) would
/// become a `NOTIFY` per download per second. One indexed query every quarter second for all
/// followed downloads costs less and has no lost-wake-up case.
///
/// Relayed queues live in the engine's `SubscriberRegistry` (counted in its statistics, paced with
/// the others, ended at shutdown) with the start sequence `UInt64.max`, so that the engine's own
/// events never reach them: when this replica later takes the download's lease, its subscribers go
/// on being fed from the database, which the new holder's heartbeat keeps fresh (simplest, and no
/// event is told twice). The other way round, when the engine lets a download go (evicted: paused
/// by its last caller, or its lease lost), its own subscribers are handed over to the relay
/// (`handOver`), so a stream opened on the replica that held the download follows it wherever it
/// is resumed. Either way a stream is one queue, so its event ids (the service numbers them) go on
/// increasing. The service's per-download subscriber cap bounds each download's queues;
/// at most `maxDownloads` downloads are followed (a subscription beyond them ends at once, as at
/// shutdown: an SSE client reconnects after its retry delay).
final class SubscriptionRelay: @unchecked Sendable {
    static let interval: Double = 0.25
    static let defaultMaxDownloads = 10_000
    /// The start sequence that marks a relayed queue.
    static let relayed = UInt64.max

    private let source: RelaySource
    private let registry: SubscriberRegistry
    private let scheduler: Scheduler
    private let ignoring: Set<String>
    private let interval: Double
    private let maxDownloads: Int
    private let work = DispatchQueue(label: "download-engine.cluster-relay")
    private let lock = NSLock()
    // Guarded by `lock`.
    private var followed: [String: RelayDiff.View] = [:]
    private var timer: ScheduledTimer?

    init(source: RelaySource, registry: SubscriberRegistry, scheduler: Scheduler, ignoring: Set<String>,
         interval: Double = SubscriptionRelay.interval, maxDownloads: Int = SubscriptionRelay.defaultMaxDownloads) {
        self.source = source
        self.registry = registry
        self.scheduler = scheduler
        self.ignoring = ignoring
        self.interval = interval
        self.maxDownloads = maxDownloads
    }

    /// Downloads followed now.
    var count: Int { lock.withLock { followed.count } }

    /// A relayed subscription to `row`'s download: its first element is the row's snapshot (its
    /// `completed`/`failed` event for one that ended, after which it ends), then what the polls find;
    /// ended at once when `maxDownloads` other downloads are followed already.
    func subscribe(_ row: ClusterRow) -> SubscriberQueue {
        let view = RelayDiff.View(row, ignoring: ignoring)
        let id = row.stored.id
        let first: DownloadEvent = switch view.snapshot.state {
        case .completed: .completed(view.snapshot)
        case .failed: .failed(view.snapshot)
        default: .progress(view.snapshot)
        }
        lock.lock()
        let queue = registry.makeQueue(for: id, after: Self.relayed)
        var refused = false
        if !first.isTerminal && followed[id] == nil {
            if followed.count >= maxDownloads { refused = true } else { followed[id] = view }
        }
        if !first.isTerminal && !refused && timer == nil {
            timer = scheduler.schedule(after: interval) { [weak self] in self?.due() }
        }
        // Under the lock: a poll that finds the queue delivers after its first element.
        if !refused { queue.push(first) }
        lock.unlock()
        if refused { queue.finish() }
        return queue
    }

    private func due() {
        work.async { [weak self] in self?.poll() }
    }

    /// One poll: reads the followed rows, publishes what changed, forgets downloads nobody follows
    /// any more, and schedules the next while any is followed.
    func poll() {
        let ids = lock.withLock { Array(followed.keys) }
        let rows = ids.isEmpty ? nil : try? source.rows(ids: ids)
        let gone = rows.map { rows in ids.filter { rows[$0] == nil } } ?? []
        let removers = gone.isEmpty ? [:] : (try? source.removers(of: gone)) ?? [:]
        var deliveries: [(id: String, queues: [SubscriberQueue], events: [DownloadEvent])] = []
        lock.lock()
        for id in ids {
            guard let before = followed[id] else { continue }
            let queues = registry.queues(for: id).filter { $0.startSequence == Self.relayed }
            guard !queues.isEmpty else {
                followed[id] = nil
                continue
            }
            guard let rows else { continue }  // The database did not answer: nothing is known.
            let after = rows[id].map { RelayDiff.View($0, ignoring: ignoring) }
            let events = RelayDiff.events(from: before, to: after, removedBy: removers[id] ?? RelayDiff.forgotten)
            if let after, events.last?.isTerminal != true { followed[id] = after } else { followed[id] = nil }
            if !events.isEmpty { deliveries.append((id, queues, events)) }
        }
        timer = followed.isEmpty ? nil : scheduler.schedule(after: interval) { [weak self] in self?.due() }
        lock.unlock()
        deliver(deliveries)
    }

    /// The engine evicted download `id` (its last row written is `view`): the engine's own queues
    /// of it are fed by the relay from now on, from `view` (the engine told them everything up to
    /// it: this runs as the engine's effect after its earlier events). Queues the relay fed already
    /// are told first what changed between their last poll and `view`. An ended download is not
    /// followed (its queues had their last event); beyond `maxDownloads` the handed-over queues end
    /// (an SSE client reconnects after its retry delay).
    func handOver(id: String, view: RelayDiff.View) {
        lock.lock()
        let queues = registry.queues(for: id)
        guard !queues.isEmpty else {
            lock.unlock()
            return
        }
        let relayedBefore = queues.filter { $0.startSequence == Self.relayed }
        let handed = queues.filter { $0.startSequence != Self.relayed }
        let catchUp = followed[id].map { RelayDiff.events(from: $0, to: view) } ?? []
        for queue in handed { queue.markRelayed() }
        var refused = false
        if view.snapshot.state == .completed || view.snapshot.state == .failed {
            followed[id] = nil
        } else if followed[id] != nil || followed.count < maxDownloads {
            followed[id] = view
        } else {
            refused = true
        }
        if followed[id] != nil && timer == nil {
            timer = scheduler.schedule(after: interval) { [weak self] in self?.due() }
        }
        lock.unlock()
        if refused { for queue in handed { queue.finish() } }
        // On the polls' queue, so that it never overtakes (nor is overtaken by) a poll's deliveries.
        if !catchUp.isEmpty && !relayedBefore.isEmpty {
            work.async { [self] in deliver([(id, relayedBefore, catchUp)]) }
        }
    }

    /// As `SubscriberRegistry.publish` does: a progress is recorded as the download's newest first
    /// (a paced queue is handed it when due), a lifecycle event clears it.
    private func deliver(_ deliveries: [(id: String, queues: [SubscriberQueue], events: [DownloadEvent])]) {
        for delivery in deliveries {
            for event in delivery.events {
                registry.recordRelayed(event, of: delivery.id)
                let pace = registry.pacer.pace()
                for queue in delivery.queues { queue.push(event, pace: pace) }
            }
        }
    }
}
