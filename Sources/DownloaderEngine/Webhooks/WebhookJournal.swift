import Foundation

/// Webhook registrations and deliveries in the state database (`state.db`, tables of
/// `SQLiteSchema` migration 3), on a connection of their own: they are written rarely (a
/// registration, a delivery made, a try's result) and each write is durable when it returns, so a
/// crash never loses a registration that was answered or a delivery that was made. Thread-safe
/// (one lock around the connection).
final class WebhookJournal: @unchecked Sendable {
    private let db: SQLiteConnection
    private let lock = NSLock()

    /// Opens `state.db` at `path` (the engine's store created it; opening also brings the schema up
    /// to date, for a journal used on its own).
    init(path: String) throws(StateStoreError) {
        db = try SQLiteConnection(path: path)
        try db.execute("PRAGMA busy_timeout = 5000")
        _ = try db.text("PRAGMA journal_mode = WAL")
        try db.execute("PRAGMA synchronous = FULL")
        try SQLiteSchema.migrate(db)
    }

    func load() throws(StateStoreError) -> (registrations: [WebhookRegistration], deliveries: [WebhookDelivery]) {
        lock.lock()
        defer { lock.unlock() }
        var registrations: [WebhookRegistration] = []
        let r = try db.prepare("SELECT id, download, token_hash, url, events, created_at FROM webhook_registrations ORDER BY created_at")
        while try r.step() {
            guard let id = r.text(0), let download = r.text(1), let hash = TokenHash(digest: r.bytes(2)),
                  let url = r.text(3), let events = r.text(4) else { continue }
            registrations.append(WebhookRegistration(
                id: id, downloadID: download, tokenHash: hash, url: url,
                events: Set(events.split(separator: ",").compactMap { WebhookEvent(rawValue: String($0)) }),
                createdAt: Date(timeIntervalSince1970: r.double(5))))
        }
        // Deliveries of removed registrations (written back by a try racing the removal, before saves checked).
        try db.execute("DELETE FROM webhook_deliveries WHERE registration NOT IN (SELECT id FROM webhook_registrations)")
        var deliveries: [WebhookDelivery] = []
        let d = try db.prepare("SELECT id, registration, event, body, tries, next_at, outcome, reason FROM webhook_deliveries")
        while try d.step() {
            guard let id = d.text(0), let registration = d.text(1), let event = d.text(2).flatMap(WebhookEvent.init(rawValue:))
            else { continue }
            deliveries.append(WebhookDelivery(
                id: id, registrationID: registration, event: event, body: Array(d.bytes(3)),
                tries: Int(d.int64(4) ?? 0), nextAt: Date(timeIntervalSince1970: d.double(5)),
                outcome: d.text(6).flatMap(WebhookOutcome.init(rawValue:)), reason: d.text(7)))
        }
        return (registrations, deliveries)
    }

    func insert(_ registration: WebhookRegistration) throws(StateStoreError) {
        lock.lock()
        defer { lock.unlock() }
        let s = try db.prepare("INSERT OR REPLACE INTO webhook_registrations (id, download, token_hash, url, events, created_at) "
                               + "VALUES (?, ?, ?, ?, ?, ?)")
        s.bind(1, registration.id)
        s.bind(2, registration.downloadID)
        s.bind(3, bytes: registration.tokenHash.digest)
        s.bind(4, registration.url)
        s.bind(5, registration.events.sorted().map(\.rawValue).joined(separator: ","))
        s.bind(6, registration.createdAt.timeIntervalSince1970)
        try s.run()
    }

    /// Inserts or replaces `delivery` (its tries, next time and outcome change as it goes).
    func save(_ delivery: WebhookDelivery) throws(StateStoreError) {
        lock.lock()
        defer { lock.unlock() }
        // Only while its registration is stored: a try's result saved just after the registration's
        // removal (a caller's DELETE racing the try) writes nothing, instead of a row nothing deletes.
        let s = try db.prepare("INSERT OR REPLACE INTO webhook_deliveries (id, registration, event, body, tries, next_at, outcome, reason) "
                               + "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8 WHERE EXISTS (SELECT 1 FROM webhook_registrations WHERE id = ?2)")
        s.bind(1, delivery.id)
        s.bind(2, delivery.registrationID)
        s.bind(3, delivery.event.rawValue)
        s.bind(4, bytes: delivery.body)
        s.bind(5, Int64(delivery.tries))
        s.bind(6, delivery.nextAt.timeIntervalSince1970)
        s.bind(7, delivery.outcome?.rawValue)
        s.bind(8, delivery.reason)
        try s.run()
    }

    /// Removes registrations and their deliveries, in one transaction.
    func remove(registrations ids: [String]) throws(StateStoreError) {
        guard !ids.isEmpty else { return }
        lock.lock()
        defer { lock.unlock() }
        try db.execute("BEGIN IMMEDIATE")
        do throws(StateStoreError) {
            let r = try db.prepare("DELETE FROM webhook_registrations WHERE id = ?")
            let d = try db.prepare("DELETE FROM webhook_deliveries WHERE registration = ?")
            for id in ids {
                r.bind(1, id)
                try r.run()
                d.bind(1, id)
                try d.run()
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }
}
