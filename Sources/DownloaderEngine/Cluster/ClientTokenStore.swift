/// Cluster mode's `--max-downloads-per-client`, counted in the database so that it covers every
/// replica: table `client_tokens` has one row per caller token (its hash, as in `tokens`) or per
/// place reserved for one, with the client address it was given to. A row counts while its token
/// is a live caller token (in `tokens`) of a download that has not ended, or for `recent` seconds
/// after it was written (a place reserved and not committed yet, or a token its holder has not
/// committed yet: they are committed within a fraction of a second); older rows that hold no place
/// are deleted when their client reaches its limit (`ClientReservation`) and by `sweep()`.
/// Reserving counts and inserts under a per-client advisory lock, so two replicas cannot both take
/// a client's last place.
public final class ClientTokenStore: Sendable {
    public enum Reservation: Sendable, Equatable {
        case reserved
        /// The client holds `limit` places already.
        case atLimit
        /// The database failed.
        case unavailable
    }

    /// Row `c`'s token is a live caller token of a download that has not ended (a completed or
    /// failed download's tokens hold nothing, as at the per-download cap).
    static let holdsPlace = "EXISTS (SELECT 1 FROM tokens t JOIN downloads d ON d.id = t.download "
        + "WHERE t.hash = c.hash AND d.state NOT IN ('completed', 'failed'))"

    /// First key of the per-client advisory locks ("dlsc").
    static let lockSpace: Int32 = 0x646C_7363
    let pool: PostgresPool
    /// Seconds a row counts without its token being live.
    public let recent: Double

    init(pool: PostgresPool, recent: Double) {
        self.pool = pool
        self.recent = recent
    }

    /// Reserves place `place` (random bytes: an id nobody else has) for `client` unless it holds
    /// `limit` places already.
    public func reserve(client: String, limit: Int, place: [UInt8]) -> Reservation {
        switch reserve(client: client, limit: limit, places: [place]) {
        case 0?: return .atLimit
        case nil: return .unavailable
        default: return .reserved
        }
    }

    /// Reserves the first of `places` for `client` unless it holds `limit` places already, and as
    /// many more of them (in order) as `block` says for the places it held before (each place is
    /// one the limit counts). Returns how many were reserved (0: at the limit); nil when the
    /// database failed.
    public func reserve(client: String, limit: Int, places: [[UInt8]], block: @escaping (Int) -> Int = { _ in 1 }) -> Int? {
        let window = String(recent)
        return try? pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) -> Int in
                try db.execute("SELECT pg_advisory_xact_lock($1::integer, hashtext($2))", [String(Self.lockSpace), client])
                func held() throws(StateStoreError) -> Int {
                    Int(try db.execute("SELECT count(*) FROM client_tokens WHERE client = $1", [client]).scalar ?? "0") ?? 0
                }
                var rows = try held()
                var step = ClientReservation.step(rows: rows, limit: limit, pruned: false)
                if step == .prune {
                    try db.execute("DELETE FROM client_tokens c WHERE c.client = $1 AND c.at < now() - make_interval(secs => $2::double precision) "
                                   + "AND NOT " + Self.holdsPlace, [client, window])
                    rows = try held()
                    step = ClientReservation.step(rows: rows, limit: limit, pruned: true)
                }
                guard step == .insert, !places.isEmpty else { return 0 }
                // `rows` is at least what the client holds: `limit - rows` places are free for certain.
                let taken = Array(places.prefix(max(1, min(block(rows), limit - rows))))
                try db.execute("INSERT INTO client_tokens (hash, client) SELECT decode(h, 'hex'), $2 FROM unnest($1::text[]) AS h",
                               [PostgresArray.literal(taken.map(PostgresArray.hex)), client])
                return taken.count
            }
        }
    }

    /// Caller token `token` was given to `client`: its row replaces place `place` (nil: none was reserved).
    public func commit(place: [UInt8]?, client: String, token: String) {
        let hash = PostgresArray.hex(TokenHash(token: token).digest)
        _ = try? pool.withConnection { db throws(StateStoreError) in
            try db.execute("WITH gone AS (DELETE FROM client_tokens WHERE hash = decode($3, 'hex')) "
                           + "INSERT INTO client_tokens (hash, client) VALUES (decode($1, 'hex'), $2) "
                           + "ON CONFLICT (hash) DO UPDATE SET client = excluded.client, at = now()",
                           [hash, client, PostgresArray.hex(place ?? [])])
        }
    }

    /// Place `place` is not needed (the request failed).
    public func release(place: [UInt8]) {
        _ = try? pool.withConnection { db throws(StateStoreError) in
            try db.execute("DELETE FROM client_tokens WHERE hash = decode($1, 'hex')", [PostgresArray.hex(place)])
        }
    }

    /// Caller token `token` was withdrawn.
    public func remove(token: String) {
        let hash = PostgresArray.hex(TokenHash(token: token).digest)
        _ = try? pool.withConnection { db throws(StateStoreError) in
            try db.execute("DELETE FROM client_tokens WHERE hash = decode($1, 'hex')", [hash])
        }
    }

    /// Places `client` holds now (nil: the database failed).
    public func count(client: String) -> Int? {
        let window = String(recent)
        let text = try? pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT count(*) FROM client_tokens c WHERE c.client = $1 AND (c.at >= now() - make_interval(secs => "
                           + "$2::double precision) OR " + Self.holdsPlace + ")", [client, window]).scalar
        }
        return text.flatMap { Int($0) }
    }

    /// Deletes every client's rows that no longer count.
    public func sweep() {
        let window = String(recent)
        _ = try? pool.withConnection { db throws(StateStoreError) in
            try db.execute("DELETE FROM client_tokens c WHERE c.at < now() - make_interval(secs => $1::double precision) "
                           + "AND NOT " + Self.holdsPlace, [window])
        }
    }
}

extension ClusterDatabase {
    /// `--max-downloads-per-client` across replicas; `recent`: seconds a row counts without a live token.
    public func clientTokens(recent: Double = 10) -> ClientTokenStore {
        ClientTokenStore(pool: pool, recent: recent)
    }

    /// The secret named `name` that every replica of the cluster shares: `generate()`'s bytes when
    /// this replica is the first to ask, else the stored ones; nil when the database failed.
    public func sharedSecret(named name: String, generate: () -> [UInt8]) -> [UInt8]? {
        let fresh = PostgresArray.hex(generate())
        let stored = try? pool.withConnection { db throws(StateStoreError) in
            try db.execute("INSERT INTO cluster_secrets (name, secret) VALUES ($1, decode($2, 'hex')) ON CONFLICT (name) DO NOTHING",
                           [name, fresh])
            return try db.execute("SELECT encode(secret, 'hex') FROM cluster_secrets WHERE name = $1", [name]).scalar
        }
        guard let text = stored else { return nil }
        return Self.bytes(hex: text)
    }

    private static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let pair = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(pair)
        }
        return out
    }
}
