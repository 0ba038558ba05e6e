import Foundation

/// Completion webhooks: each caller's callback (registered with its `POST /downloads`), and the
/// deliveries made when a download completes or fails, sent by `CurlWebhookPoster` on a few worker
/// threads on `WebhookSchedule`'s timetable (timers through the injected `Scheduler`).
///
/// - Registrations and deliveries are stored (`WebhookJournal`) before they are acted on: a
///   crash loses neither; a pending delivery carries on after a restart, with the same id and body.
/// - One delivery per registration and event; each caller's registration is its own.
/// - A registration goes with its caller's token (`drop(token:)`), once its download completed and
///   any `completed` delivery ended, or once its download is gone (removed) and no delivery of it
///   is under way.
public final class WebhookDispatcher: @unchecked Sendable {
    let journal: WebhookJournal
    let poster: WebhookPosting
    let scheduler: Scheduler
    let random: RandomSource
    let egress: EgressRules
    let schedule: WebhookSchedule
    /// The current snapshot of a download (nil: unknown). Never called under `lock`.
    let lookup: @Sendable (String) -> DownloadSnapshot?
    /// Tries in flight at once (each blocks a worker up to `schedule.tryTimeout`), at most
    /// `triesPerReceiver` of them for one receiver.
    let workers: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "download-engine.webhooks"
        queue.maxConcurrentOperationCount = 32
        return queue
    }()
    static let triesPerReceiver = 2
    /// Download events arrive here from the engine, off its threads (the journal writes wait for the disk).
    let intake = DispatchQueue(label: "download-engine.webhooks.intake")

    let lock = NSLock()
    // Guarded by `lock`.
    var settings: WebhookSettings?
    var registrations = WebhookRegistrations()
    var deliveries: [DeliveryKey: WebhookDelivery] = [:]
    var timers: [String: ScheduledTimer] = [:]
    var lanes = ReceiverLanes<TryTicket>(limit: WebhookDispatcher.triesPerReceiver)
    var stats = WebhookStatistics()
    /// Cluster mode: registrations and deliveries in the cluster database instead (set once, before `start`).
    var cluster: ClusterWebhooks?

    init(journal: WebhookJournal, poster: WebhookPosting, scheduler: Scheduler, random: RandomSource,
         egress: EgressRules, schedule: WebhookSchedule = WebhookSchedule(),
         lookup: @escaping @Sendable (String) -> DownloadSnapshot?) throws(StateStoreError) {
        self.journal = journal
        self.poster = poster
        self.scheduler = scheduler
        self.random = random
        self.egress = egress
        self.schedule = schedule
        self.lookup = lookup
        let loaded = try journal.load()
        for registration in loaded.registrations { registrations.insert(registration) }
        for delivery in loaded.deliveries where registrations[delivery.registrationID] != nil {
            deliveries[delivery.key] = delivery
        }
    }

    /// Starts delivering: pending deliveries resume (each at its stored time, or now), and
    /// registrations whose download ended while no delivery could be made (a crash between the two)
    /// get theirs. Call once, before callers register.
    public func start(_ settings: WebhookSettings) {
        if let cluster = lock.withLock({ () -> ClusterWebhooks? in
            self.settings = settings
            return self.cluster
        }) {
            cluster.start(self)
            return
        }
        let (pending, all) = lock.withLock {
            self.settings = settings
            return (deliveries.values.filter { $0.outcome == nil }, registrations.all)
        }
        // Each at its stored time, never further off than the schedule waits: a time stored while
        // the wall clock ran ahead (corrected before this start) would hold the delivery for as long.
        let now = scheduler.now()
        for delivery in pending {
            arm(delivery.id, key: delivery.key, after: min(max(0, delivery.nextAt.timeIntervalSince(now)), schedule.longestDelay))
        }
        var gone: [String] = []
        for registration in all {
            guard let snapshot = lookup(registration.downloadID) else {
                let waiting = lock.withLock { deliveries.values.contains { $0.registrationID == registration.id && $0.outcome == nil } }
                if !waiting { gone.append(registration.id) }
                continue
            }
            settle(snapshot, registrationIDs: [registration.id])
        }
        remove(gone)
    }

    /// Before anything is created: a callback URL must be one a download could have (same grammar,
    /// no `user:password@`: `invalidURL`, `urlCredentials`), and one whose host the SSRF guard's
    /// rules do not refuse already (`destinationForbidden`; addresses behind names are judged when
    /// a try connects).
    public func screen(_ callback: CallbackRequest) throws(EngineError) {
        let url = try URLNormalizer.normalize(callback.url, allowCredentials: false).get()
        try egress.screen(url: url)
    }

    /// Records `callback` for the caller holding `token` on download `snapshot.id`, durably, before
    /// it returns. A download that already ended (a `POST` answered `200`) gets its delivery at once.
    public func register(_ callback: CallbackRequest, token: String, snapshot: DownloadSnapshot) throws(WebhookJournalError) {
        let registration = WebhookRegistration(id: "wh_" + random.hex(byteCount: 12), downloadID: snapshot.id,
                                               tokenHash: TokenHash(token: token), url: callback.url,
                                               events: callback.events, createdAt: scheduler.now())
        let cluster = lock.withLock { self.cluster }
        do throws(StateStoreError) {
            // Cluster mode: a round of any replica makes its delivery when the download has ended.
            if let cluster { return try cluster.store.insert(registration) }
            try journal.insert(registration)
        } catch {
            throw WebhookJournalError(message: error.message)
        }
        lock.withLock { registrations.insert(registration) }
        // The download may have ended between the engine's answer and now: the newest state counts.
        settle(lookup(snapshot.id) ?? snapshot, registrationIDs: [registration.id])
    }

    /// The caller withdrew (`DELETE /downloads/{token}`): its callbacks and their pending deliveries go.
    public func drop(token: String) {
        drop(tokenHash: TokenHash(token: token))
    }

    /// The caller token hashed `hash` was dropped (by the caller, or to make room for another).
    func drop(tokenHash hash: TokenHash) {
        if let cluster = lock.withLock({ self.cluster }) {
            try? cluster.store.drop(tokenHash: hash)
            return
        }
        let ids = lock.withLock { registrations.ids(ofToken: hash) }
        remove(ids)
    }

    /// Counters for `/metrics`.
    public var statistics: WebhookStatistics { lock.withLock { stats } }

    /// Registrations and deliveries known (pending or ended), for tests and diagnostics.
    var counts: (registrations: Int, pending: Int) {
        lock.withLock { (registrations.count, deliveries.values.count { $0.outcome == nil }) }
    }

    /// From the engine (download `id` was removed): its registrations go, but for those whose
    /// delivery is under way: the event it tells happened (a caller waiting for `failed` must hear
    /// it), so it goes on to its outcome, and its registration goes then (`record`). Cluster mode
    /// keeps the rows to its rounds.
    func downloadRemoved(id: String) {
        guard lock.withLock({ cluster }) == nil else { return }
        intake.async {
            let ids = self.lock.withLock { () -> [String] in
                self.registrations.of(download: id).map(\.id).filter { registration in
                    !WebhookEvent.allCases.contains { event in
                        self.deliveries[DeliveryKey(registrationID: registration, event: event)].map { $0.outcome == nil } ?? false
                    }
                }
            }
            self.remove(ids)
        }
    }

    /// From the engine (a download completed or failed), on whatever thread it acts on: handled on `intake`.
    func downloadEnded(_ snapshot: DownloadSnapshot) {
        guard lock.withLock({ cluster }) == nil else { return }  // The cluster's rounds read the rows.
        intake.async { self.settle(snapshot, registrationIDs: nil) }
    }

    /// Makes the deliveries `snapshot`'s state calls for, for `registrationIDs` (nil: every
    /// registration of the download), then ends registrations with nothing left to do.
    func settle(_ snapshot: DownloadSnapshot, registrationIDs: [String]?) {
        let event: WebhookEvent
        switch snapshot.state {
        case .completed: event = .completed
        case .failed: event = .failed
        default: return
        }
        var made: [WebhookDelivery] = []
        var finished: [String] = []
        lock.lock()
        let candidates = registrationIDs?.compactMap { registrations[$0] }
            ?? registrations.of(download: snapshot.id)
        if let settings {
            for registration in candidates where registration.downloadID == snapshot.id {
                let key = DeliveryKey(registrationID: registration.id, event: event)
                if registration.events.contains(event), deliveries[key] == nil {
                    let id = WebhookDelivery.id(registrationID: registration.id, event: event)
                    let delivery = WebhookDelivery(id: id, registrationID: registration.id, event: event,
                                                   body: settings.render(event, id, snapshot), tries: 0,
                                                   nextAt: scheduler.now())
                    deliveries[key] = delivery
                    made.append(delivery)
                } else if event == .completed, !registration.events.contains(.completed) {
                    finished.append(registration.id)
                }
            }
        }
        lock.unlock()
        for delivery in made {
            // Stored before the first try: from here a crash never loses it. When the store fails it is
            // tried all the same (and made again, with the same id, if the process dies first).
            store(delivery, settings: settings)
            arm(delivery.id, key: delivery.key, after: 0)
        }
        remove(finished)
    }

    /// Stores `delivery` in the journal; a failure is told (`WebhookSettings.journalFailed`), not thrown.
    func store(_ delivery: WebhookDelivery, settings: WebhookSettings?) {
        do throws(StateStoreError) {
            try journal.save(delivery)
        } catch {
            settings?.journalFailed("could not store webhook delivery \(delivery.id): \(error.message)")
        }
    }

    /// Forgets registrations `ids` with their deliveries (pending tries are cancelled), journal first
    /// (a failure is told: they may come back after a restart).
    func remove(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        do throws(StateStoreError) {
            try journal.remove(registrations: ids)
        } catch {
            lock.withLock { settings }?.journalFailed("could not remove \(ids.count) webhook registration(s): \(error.message)")
        }
        lock.withLock {
            for id in ids {
                registrations.remove(id)
                for event in WebhookEvent.allCases {
                    if let delivery = deliveries.removeValue(forKey: DeliveryKey(registrationID: id, event: event)) {
                        timers.removeValue(forKey: delivery.id)?.cancel()
                    }
                }
            }
        }
    }
}

/// A registration could not be stored (the state database failed): it was not made.
public struct WebhookJournalError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
