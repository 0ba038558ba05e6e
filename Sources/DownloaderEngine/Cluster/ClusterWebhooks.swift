import Foundation
import Synchronization

/// Cluster mode's completion webhooks: the dispatcher's registrations and deliveries live in the
/// cluster database (`ClusterWebhookStore`) instead of the replica's `state.db`, so that a delivery
/// is made once for the cluster, not once per replica, and is not lost with the replica that would
/// have sent it.
///
/// Every `interval` seconds (timed by the engine's scheduler, run on a queue of its own) each
/// replica: makes the deliveries owed (registrations whose download's row ended in an event they
/// asked for: the row is the truth, whichever replica held the download, and a delivery is made
/// once thanks to its unique key), forgets registrations with nothing left to do (now and then),
/// and claims due deliveries, as many as its workers are free for and at most
/// `WebhookDispatcher.triesPerReceiver` in flight per receiver host (as the single process's
/// lanes: one slow receiver never holds every worker), for a try's bound plus a margin. A try is sent only under the claim and recorded only while the claim is still this
/// replica's; a replica that dies mid-try leaves its claim to lapse, and another takes the
/// delivery over (at least once, the same `deliveryId` and body, as after a restart in a single
/// process). The timetable of tries is the dispatcher's (`WebhookSchedule`, `judged`).
final class ClusterWebhooks: @unchecked Sendable {
    static let interval: Double = 0.5
    /// How much longer than a try's bound a claim lasts.
    static let claimMargin: Double = 5
    /// Deliveries tried at once by a replica (the dispatcher's workers).
    static let workers = 32

    let store: ClusterWebhookStore
    private let reader: ClusterReader
    private let ignoring: Set<String>
    private let scheduler: Scheduler
    /// This replica's name in `claimed_by` (its owner name and a random part: unique per run).
    let owner: String
    private let work = DispatchQueue(label: "download-engine.cluster-webhooks")
    private let lock = NSLock()
    // Guarded by `lock`.
    private weak var dispatcher: WebhookDispatcher?
    private var timer: ScheduledTimer?
    private var stopped = false
    /// Tries in flight, by receiver.
    private var running: [String: Int] = [:]
    private var rounds = 0
    /// Tests: seconds a claim lasts (nil: the try's bound plus `claimMargin`), and a replica that
    /// claims and then never tries nor records (as one that died right after claiming).
    var claimSecondsForTests: Double?
    let abandonsClaimsForTests = Atomic<Bool>(false)

    init(pool: PostgresPool, ignoring: Set<String>, scheduler: Scheduler, owner: String) {
        store = ClusterWebhookStore(pool: pool)
        reader = ClusterReader(pool: pool)
        self.ignoring = ignoring
        self.scheduler = scheduler
        self.owner = owner
    }

    /// Starts the rounds for `dispatcher` (its settings are set).
    func start(_ dispatcher: WebhookDispatcher) {
        lock.withLock {
            self.dispatcher = dispatcher
            guard !stopped, timer == nil else { return }
            timer = scheduler.schedule(after: 0) { [weak self] in self?.due() }
        }
    }

    func stop() {
        lock.withLock {
            stopped = true
            timer?.cancel()
            timer = nil
        }
    }

    private func due() {
        work.async { [weak self] in self?.round() }
    }

    /// One round: deliveries owed are made, due ones claimed and tried; the next round scheduled.
    func round() {
        let (dispatcher, running, sweep) = lock.withLock { () -> (WebhookDispatcher?, [String: Int], Bool) in
            rounds += 1
            return (stopped ? nil : self.dispatcher, self.running, rounds % 20 == 1)
        }
        guard let dispatcher, let settings = dispatcher.lock.withLock({ dispatcher.settings }) else { return }
        makeOwed(settings, dispatcher)
        if sweep { stored(dispatcher, ()) { () throws(StateStoreError) in try store.sweep() } }
        let seconds = claimSecondsForTests ?? dispatcher.schedule.tryTimeout + Self.claimMargin
        let free = Self.workers - running.values.reduce(0, +)
        let claimed = stored(dispatcher, []) { () throws(StateStoreError) in
            try store.claim(owner: owner, seconds: seconds, limit: free, running: running)
        }
        if !claimed.isEmpty && !abandonsClaimsForTests.load(ordering: .acquiring) {
            lock.withLock { for (_, receiver) in claimed { self.running[receiver, default: 0] += 1 } }
            for (claim, receiver) in claimed {
                dispatcher.workers.addOperation { [self] in
                    self.attempt(claim, dispatcher: dispatcher, settings: settings)
                    self.lock.withLock {
                        let left = self.running[receiver, default: 1] - 1
                        self.running[receiver] = left > 0 ? left : nil
                    }
                }
            }
        }
        lock.withLock {
            guard !stopped else { return }
            timer = scheduler.schedule(after: Self.interval) { [weak self] in self?.due() }
        }
    }

    /// The deliveries owed, rendered from the download's row as it is now (made once: another
    /// replica's, made first, stays).
    private func makeOwed(_ settings: WebhookSettings, _ dispatcher: WebhookDispatcher) {
        let owed = stored(dispatcher, []) { () throws(StateStoreError) in try store.owed() }
        guard !owed.isEmpty else { return }
        let rows = stored(dispatcher, [:]) { () throws(StateStoreError) in try reader.rows(ids: Array(Set(owed.map(\.downloadID)))) }
        for entry in owed {
            guard let snapshot = rows[entry.downloadID]?.snapshot(ignoring: ignoring) else { continue }
            let id = WebhookDelivery.id(registrationID: entry.registrationID, event: entry.event)
            let delivery = WebhookDelivery(id: id, registrationID: entry.registrationID, event: entry.event,
                                           body: settings.render(entry.event, id, snapshot), tries: 0, nextAt: Date())
            stored(dispatcher, false) { () throws(StateStoreError) in try store.make(delivery) }
        }
    }

    /// Worker: one try of a claimed delivery, recorded while the claim is still this replica's.
    private func attempt(_ claim: ClusterWebhookStore.Claimed, dispatcher: WebhookDispatcher, settings: WebhookSettings) {
        let result = dispatcher.poster.post(url: claim.url, headers: WebhookDispatcher.headers(of: claim.delivery, settings),
                                            body: claim.delivery.body, timeout: dispatcher.schedule.tryTimeout)
        let (delivery, delay) = dispatcher.judged(result, of: claim.delivery)
        let kept = stored(dispatcher, false) { () throws(StateStoreError) in try store.record(delivery, delay: delay, owner: owner) }
        dispatcher.lock.withLock {
            dispatcher.stats.tries += 1
            if kept, let outcome = delivery.outcome { dispatcher.stats.deliveries[outcome, default: 0] += 1 }
        }
        guard kept, let outcome = delivery.outcome else { return }
        // A completed download's registration has nothing left to do once its delivery ended.
        if delivery.event == .completed {
            stored(dispatcher, ()) { () throws(StateStoreError) in try store.remove(registration: delivery.registrationID) }
        }
        settings.report(WebhookDispatcher.report(delivery, outcome: outcome, downloadID: claim.downloadID, url: claim.url))
    }

    /// One call to the cluster database; a failure (the database unreachable or too slow: the
    /// round or the try comes again) is counted for `/metrics` and read as `fallback`.
    @discardableResult
    private func stored<T>(_ dispatcher: WebhookDispatcher, _ fallback: T, _ call: () throws(StateStoreError) -> T) -> T {
        do throws(StateStoreError) {
            return try call()
        } catch {
            dispatcher.lock.withLock { dispatcher.stats.storeErrors += 1 }
            return fallback
        }
    }
}
