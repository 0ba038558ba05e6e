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

    /// A callback URL's receiver, in SQL: its host (lower-cased), whatever the scheme, user and port
    /// (`ReceiverLanes.receiver`'s rule; the URL itself if none can be read).
    static let receiverSQL = #"lower(coalesce(substring(r.url FROM '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(\[[^]/?#]*\]|[^:/?#]*)'), r.url))"#

    /// Claims up to `limit` due deliveries for `owner` for `seconds`: none of them is tried by
    /// another replica until the claim lapses. At most `perReceiver` for one receiver, counting
    /// `running` (this replica's tries in flight, by receiver): one slow receiver never holds all
    /// of a replica's workers. Receivers already at their bound are passed over, so the due
    /// deliveries of others are found behind theirs. Each claimed delivery comes with its receiver.
    func claim(owner: String, seconds: Double, limit: Int, perReceiver: Int = WebhookDispatcher.triesPerReceiver,
               running: [String: Int] = [:]) throws(StateStoreError) -> [(claimed: Claimed, receiver: String)] {
        guard limit > 0 else { return [] }
        let busy = running.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        let full = busy.filter { $0.value >= perReceiver }.map(\.key)
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                WITH due AS (
                    SELECT w.id, w.next_at, \(Self.receiverSQL) AS receiver
                    FROM webhook_deliveries AS w JOIN webhook_registrations AS r ON r.id = w.registration
                    WHERE w.outcome IS NULL AND w.next_at <= now() AND (w.claim_until IS NULL OR w.claim_until < now())
                    AND NOT (\(Self.receiverSQL) = ANY($3::text[]))
                    ORDER BY w.next_at LIMIT \(max(64, limit * 8)) FOR UPDATE OF w SKIP LOCKED
                ), ranked AS (
                    SELECT due.id, due.next_at, due.receiver,
                        row_number() OVER (PARTITION BY due.receiver ORDER BY due.next_at, due.id) AS n FROM due
                ), chosen AS (
                    SELECT ranked.id, ranked.receiver FROM ranked
                    LEFT JOIN unnest($4::text[], $5::int[]) AS busy (receiver, running) ON busy.receiver = ranked.receiver
                    WHERE ranked.n + coalesce(busy.running, 0) <= $6
                    ORDER BY ranked.next_at, ranked.id LIMIT \(limit)
                )
                UPDATE webhook_deliveries AS w SET claimed_by = $1, claim_until = now() + make_interval(secs => $2::float8)
                FROM webhook_registrations AS r, chosen
                WHERE r.id = w.registration AND w.id = chosen.id
                RETURNING w.id, w.registration, w.event, encode(w.body, 'hex'), w.tries, r.url, r.download, chosen.receiver
                """, [owner, String(seconds), PostgresArray.literal(full), PostgresArray.literal(busy.map(\.key)),
                      "{" + busy.map { String($0.value) }.joined(separator: ",") + "}", String(perReceiver)])
        }.rows
        return rows.compactMap { row in
            guard let id = row[0], let registration = row[1], let event = row[2].flatMap(WebhookEvent.init(rawValue:)),
                  let body = row[3].flatMap(PostgresArray.bytes(hex:)), let url = row[5], let download = row[6], let receiver = row[7]
            else { return nil }
            return (Claimed(delivery: WebhookDelivery(id: id, registrationID: registration, event: event, body: body,
                                                      tries: row[4].flatMap { Int($0) } ?? 0, nextAt: Date()),
                            url: url, downloadID: download), receiver)
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
