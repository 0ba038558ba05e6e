import Foundation

// One try of a delivery, and what its result decides (`WebhookSchedule`).
extension WebhookDispatcher {
    /// A try waiting for, or holding, a place in its receiver's lane.
    struct TryTicket {
        let key: DeliveryKey
        let id: String
    }

    /// The try of delivery `id` runs `after` seconds from now, on a worker, once its receiver's
    /// lane has room (`ReceiverLanes`).
    func arm(_ id: String, key: DeliveryKey, after seconds: Double) {
        let timer = scheduler.schedule(after: seconds) { [weak self] in self?.due(key: key, id: id) }
        lock.withLock {
            if deliveries[key]?.id == id { timers[id] = timer } else { timer.cancel() }
        }
    }

    /// The time of delivery `id`'s try came: it runs now, or after the tries of its receiver ahead of it.
    private func due(key: DeliveryKey, id: String) {
        let admitted = lock.withLock { () -> (receiver: String, tried: TryTicket)? in
            guard let url = registrations[key.registrationID]?.url else { return nil }
            let receiver = ReceiverLanes<TryTicket>.receiver(of: url)
            return lanes.admit(TryTicket(key: key, id: id), receiver: receiver).map { (receiver, $0) }
        }
        if let admitted { start(admitted.tried, receiver: admitted.receiver) }
    }

    /// Runs `ticket`'s try on a worker; when it ended, the next waiting try of the same receiver.
    private func start(_ ticket: TryTicket, receiver: String) {
        workers.addOperation { [weak self] in
            guard let self else { return }
            self.runTry(key: ticket.key, id: ticket.id)
            if let next = self.lock.withLock({ self.lanes.ended(receiver: receiver) }) { self.start(next, receiver: receiver) }
        }
    }

    /// Worker thread: sends the delivery once and records what came of it.
    func runTry(key: DeliveryKey, id: String) {
        let found = lock.withLock { () -> (WebhookDelivery, WebhookRegistration, WebhookSettings)? in
            timers[id] = nil
            guard let delivery = deliveries[key], delivery.id == id, delivery.outcome == nil,
                  let registration = registrations[key.registrationID], let settings else { return nil }
            return (delivery, registration, settings)
        }
        guard let (delivery, registration, settings) = found else { return }
        let result = poster.post(url: registration.url, headers: Self.headers(of: delivery, settings), body: delivery.body,
                                 timeout: schedule.tryTimeout)
        record(result, of: delivery, registration: registration, settings: settings)
    }

    /// The headers of a try of `delivery` (signed when there is a secret).
    static func headers(of delivery: WebhookDelivery, _ settings: WebhookSettings) -> [(String, String)] {
        var headers = [("Content-Type", "application/json"), ("User-Agent", settings.userAgent), ("X-Delivery-Id", delivery.id)]
        if let secret = settings.secret {
            headers.append(("X-Signature-256", "sha256=" + HMACSHA256.hex(key: secret, message: delivery.body)))
        }
        return headers
    }

    /// Decides on a try's result: delivered, forbidden, another try later (the delay), or given up.
    func judged(_ result: WebhookTryResult, of tried: WebhookDelivery) -> (delivery: WebhookDelivery, delay: Double?) {
        var delivery = tried
        delivery.tries += 1
        var retryAfter: Double?
        switch result {
        case .answered(let status, _) where (200..<300).contains(status):
            delivery.outcome = .delivered
        case .forbidden(let reason):
            delivery.outcome = .forbidden
            delivery.reason = reason
        case .answered(let status, let header):
            delivery.reason = "answered \(status)"
            retryAfter = WebhookSchedule.retryAfterSeconds(header, now: scheduler.now())
        case .failed(let reason):
            delivery.reason = reason
        }
        var delay: Double?
        if delivery.outcome == nil {
            delay = schedule.delay(afterTry: delivery.tries, retryAfter: retryAfter, unit: random.unit())
            if let delay {
                delivery.nextAt = scheduler.now().addingTimeInterval(delay)
            } else {
                delivery.outcome = .gaveUp
                delivery.reason = "no 2xx in \(delivery.tries) tries; last: \(delivery.reason ?? "?")"
            }
        }
        return (delivery, delay)
    }

    /// Records a try's result: delivered, forbidden, another try later, or given up.
    private func record(_ result: WebhookTryResult, of tried: WebhookDelivery, registration: WebhookRegistration,
                        settings: WebhookSettings) {
        let (delivery, delay) = judged(result, of: tried)
        let current = lock.withLock { () -> Bool in
            stats.tries += 1
            guard deliveries[delivery.key]?.id == delivery.id else { return false }  // dropped meanwhile
            deliveries[delivery.key] = delivery
            if let outcome = delivery.outcome { stats.deliveries[outcome, default: 0] += 1 }
            return true
        }
        guard current else { return }
        store(delivery, settings: settings)
        if let delay, delivery.outcome == nil {
            arm(delivery.id, key: delivery.key, after: delay)
            return
        }
        guard let outcome = delivery.outcome else { return }
        // A completed download's registration has nothing left to do once its delivery ended, nor
        // has a removed download's.
        if delivery.event == .completed || lookup(registration.downloadID) == nil { remove([registration.id]) }
        settings.report(Self.report(delivery, outcome: outcome, downloadID: registration.downloadID, url: registration.url))
    }

    static func report(_ delivery: WebhookDelivery, outcome: WebhookOutcome, downloadID: String, url: String) -> WebhookReport {
        WebhookReport(deliveryID: delivery.id, downloadID: downloadID, event: delivery.event, shownURL: CallbackRequest.shown(url),
                      outcome: outcome, tries: delivery.tries, reason: outcome == .delivered ? nil : delivery.reason)
    }
}
