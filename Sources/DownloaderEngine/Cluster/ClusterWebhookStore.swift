import Foundation

/// Completion webhooks in the cluster database (`PostgresSchema` migration 9), for `ClusterWebhooks`:
/// registrations any replica sees, deliveries made once per registration and event whichever
/// replicas see the end, and tries taken under a claim. Each call is one transaction on a pooled
/// connection; times are the database's.
struct ClusterWebhookStore: Sendable {
    let pool: PostgresPool

    /// A registration whose download ended with an event it asked for, and no delivery of it yet.
    struct Owed: Sendable, Equatable {
        var registrationID: String
        var downloadID: String
        var event: WebhookEvent
    }

    /// A delivery claimed for a try, with what the try needs.
    struct Claimed: Sendable, Equatable {
        var delivery: WebhookDelivery
        var url: String
        var downloadID: String
    }

    func insert(_ registration: WebhookRegistration) throws(StateStoreError) {
        _ = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("INSERT INTO webhook_registrations (id, download, token_hash, url, events) VALUES ($1, $2, decode($3, 'hex'), $4, $5) "
                           + "ON CONFLICT (id) DO NOTHING",
                           [registration.id, registration.downloadID, PostgresArray.hex(registration.tokenHash.digest), registration.url,
                            registration.events.sorted().map(\.rawValue).joined(separator: ",")])
        }
    }

    /// Removes the registrations of the caller token hashing to `hash` (their deliveries go with them).
    func drop(tokenHash hash: TokenHash) throws(StateStoreError) {
        _ = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("DELETE FROM webhook_registrations WHERE token_hash = decode($1, 'hex')", [PostgresArray.hex(hash.digest)])
        }
    }

    func remove(registration id: String) throws(StateStoreError) {
        _ = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("DELETE FROM webhook_registrations WHERE id = $1", [id])
        }
    }

    /// Up to `limit` deliveries owed: registrations whose download's row ended in an event they asked for.
    func owed(limit: Int = 100) throws(StateStoreError) -> [Owed] {
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                SELECT r.id, r.download, d.state FROM webhook_registrations AS r JOIN downloads AS d ON d.id = r.download
                WHERE d.state IN ('completed', 'failed') AND d.state = ANY(string_to_array(r.events, ','))
                AND NOT EXISTS (SELECT 1 FROM webhook_deliveries AS w WHERE w.registration = r.id AND w.event = d.state)
                LIMIT \(limit)
                """)
        }.rows
        return rows.compactMap { row in
            guard let registration = row[0], let download = row[1], let event = row[2].flatMap(WebhookEvent.init(rawValue:)) else { return nil }
            return Owed(registrationID: registration, downloadID: download, event: event)
        }
    }

    /// Stores `delivery` unless the registration has one for its event already (another replica
    /// made it first). True when this one was stored.
    @discardableResult
    func make(_ delivery: WebhookDelivery) throws(StateStoreError) -> Bool {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("INSERT INTO webhook_deliveries (id, registration, event, body) SELECT $1, $2, $3, decode($4, 'hex') "
                           + "WHERE EXISTS (SELECT 1 FROM webhook_registrations WHERE id = $2) "
                           + "ON CONFLICT (registration, event) DO NOTHING RETURNING 1",
                           [delivery.id, delivery.registrationID, delivery.event.rawValue, PostgresArray.hex(delivery.body)])
        }.rows.count == 1
    }

    /// Registrations with nothing left to do: the download completed and they did not ask for
    /// `completed`, or the download is gone (a minute after they were made: the row is written
    /// after the answer) and no delivery of theirs is pending.
    func sweep() throws(StateStoreError) {
        _ = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                DELETE FROM webhook_registrations AS r WHERE
                (EXISTS (SELECT 1 FROM downloads AS d WHERE d.id = r.download AND d.state = 'completed')
                 AND NOT 'completed' = ANY(string_to_array(r.events, ',')))
                OR (r.created_at < now() - interval '1 minute' AND NOT EXISTS (SELECT 1 FROM downloads AS d WHERE d.id = r.download)
                    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries AS w WHERE w.registration = r.id AND w.outcome IS NULL))
                """)
        }
    }

    /// Claims up to `limit` due deliveries for `owner` for `seconds`: none of them is tried by
    /// another replica until the claim lapses.
    func claim(owner: String, seconds: Double, limit: Int) throws(StateStoreError) -> [Claimed] {
        guard limit > 0 else { return [] }
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                UPDATE webhook_deliveries AS w SET claimed_by = $1, claim_until = now() + make_interval(secs => $2::float8)
                FROM webhook_registrations AS r
                WHERE r.id = w.registration AND w.id IN (SELECT id FROM webhook_deliveries WHERE outcome IS NULL AND next_at <= now()
                    AND (claim_until IS NULL OR claim_until < now()) ORDER BY next_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING w.id, w.registration, w.event, encode(w.body, 'hex'), w.tries, r.url, r.download
                """, [owner, String(seconds)])
        }.rows
        return rows.compactMap { row in
            guard let id = row[0], let registration = row[1], let event = row[2].flatMap(WebhookEvent.init(rawValue:)),
                  let body = row[3].flatMap(PostgresArray.bytes(hex:)), let url = row[5], let download = row[6] else { return nil }
            return Claimed(delivery: WebhookDelivery(id: id, registrationID: registration, event: event, body: body,
                                                     tries: row[4].flatMap { Int($0) } ?? 0, nextAt: Date()),
                           url: url, downloadID: download)
        }
    }

    /// Records a try of `delivery` made under `owner`'s claim (released): its tries, outcome and
    /// reason, and the next try `delay` seconds from now. False when the claim was lost meanwhile
    /// (another replica took it over): nothing is written.
    func record(_ delivery: WebhookDelivery, delay: Double?, owner: String) throws(StateStoreError) -> Bool {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                UPDATE webhook_deliveries SET tries = $2, outcome = $3, reason = $4,
                    next_at = now() + make_interval(secs => $5::float8), claimed_by = NULL, claim_until = NULL
                WHERE id = $1 AND claimed_by = $6 RETURNING 1
                """, [delivery.id, String(delivery.tries), delivery.outcome?.rawValue, delivery.reason, String(delay ?? 0), owner])
        }.rows.count == 1
    }
}
