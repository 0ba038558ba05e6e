/// The leases in the cluster database: one row per coalescing key, which survives releases so that
/// epochs only ever grow. Expiry is the database's clock (`now()`), never a replica's. Every change a
/// holder makes names its epoch (`WHERE epoch = $e`): once another replica took the key, the change
/// touches no row and the holder learns it is fenced. A row no download names any more is deleted
/// once it has been idle for `idleRetention` (`forgetIdle`, by the janitor): a row made again starts
/// above the epoch floor, the highest epoch ever deleted, so a key's epochs still only grow.
struct LeaseStore: Sendable {
    let pool: PostgresPool

    /// A granted lease: its epoch, and what the previous epoch left (the partial it wrote and the
    /// offset of it known durable), to resume from.
    struct Grant: Sendable, Equatable {
        var epoch: Int64
        var partFile: String?
        var durableOffset: Int64
    }

    /// A lease whose holder stopped renewing it while its transfer was unfinished.
    struct Lapsed: Sendable, Equatable {
        var key: String
        var epoch: Int64
        var owner: String
    }

    /// Takes `key` for `owner` when nobody holds it or its lease expired; nil while another holds it.
    /// A new row starts above the epoch floor, read `FOR SHARE`: a raise of the floor under way is
    /// waited for and read as it ends, and one not begun waits for this statement (so the deletion
    /// that follows it finds the row taken) — a key's epoch never repeats.
    /// `reclaiming`: also when `owner` itself holds it unexpired, under a higher epoch (its holder
    /// knows that lease stopped: nothing of it writes any more).
    func acquire(key: String, owner: String, ownerURL: String, ttl: Double, reclaiming: Bool = false) throws(StateStoreError) -> Grant? {
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                INSERT INTO leases AS l (key, owner, owner_url, epoch, expires_at, active)
                VALUES ($1, $2, $3, (SELECT epoch + 1 FROM lease_epoch_floor FOR SHARE), now() + $4::float8 * interval '1 second', true)
                ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, owner_url = EXCLUDED.owner_url,
                    epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at, active = true
                WHERE l.expires_at <= now() OR ($5::boolean AND l.owner = EXCLUDED.owner)
                RETURNING epoch, part_file, durable_offset
                """, [key, owner, ownerURL, String(ttl), String(reclaiming)])
        }
        guard let row = rows.rows.first, let epoch = row[0].flatMap({ Int64($0) }) else { return nil }
        return Grant(epoch: epoch, partFile: row[1], durableOffset: row[2].flatMap { Int64($0) } ?? 0)
    }

    /// Extends the lease by `ttl` from the database's now, if `epoch` still holds it unexpired.
    /// false: refused (fenced).
    func renew(key: String, epoch: Int64, ttl: Double) throws(StateStoreError) -> Bool {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("UPDATE leases SET expires_at = now() + $3::float8 * interval '1 second' "
                           + "WHERE key = $1 AND epoch = $2 AND active AND expires_at > now()", [key, String(epoch), String(ttl)])
        }.affected == 1
    }

    /// `renew(key:epoch:ttl:)` for many leases in one statement (one round trip, however many a
    /// replica holds): the keys renewed; the others were refused (fenced).
    func renew(_ leases: [(key: String, epoch: Int64)], ttl: Double) throws(StateStoreError) -> Set<String> {
        guard !leases.isEmpty else { return [] }
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("""
                UPDATE leases AS l SET expires_at = now() + $3::float8 * interval '1 second'
                FROM unnest($1::text[], $2::bigint[]) AS r(key, epoch)
                WHERE l.key = r.key AND l.epoch = r.epoch AND l.active AND l.expires_at > now()
                RETURNING l.key
                """, [PostgresArray.literal(leases.map(\.key)), PostgresArray.literal(leases.map { String($0.epoch) }), String(ttl)])
        }.rows
        return Set(rows.compactMap { $0[0] })
    }

    /// Records the partial `epoch` writes and the offset of it known durable. false: fenced.
    func checkpoint(key: String, epoch: Int64, partFile: String, durableOffset: Int64) throws(StateStoreError) -> Bool {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("UPDATE leases SET part_file = $3, durable_offset = $4 WHERE key = $1 AND epoch = $2 AND active",
                           [key, String(epoch), partFile, String(durableOffset)])
        }.affected == 1
    }

    /// Gives the key up (the transfer finished, paused or failed): nobody is to take it over. The row
    /// stays, so the next epoch is higher still. false: fenced.
    func release(key: String, epoch: Int64) throws(StateStoreError) -> Bool {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("UPDATE leases SET active = false, expires_at = now() WHERE key = $1 AND epoch = $2 AND active",
                           [key, String(epoch)])
        }.affected == 1
    }

    /// Up to `limit` leases of unfinished transfers whose holder stopped renewing them.
    func lapsed(limit: Int) throws(StateStoreError) -> [Lapsed] {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT key, epoch, owner FROM leases WHERE active AND expires_at <= now() ORDER BY expires_at LIMIT $1",
                           [String(limit)])
        }.rows.compactMap { row in
            guard let key = row[0], let epoch = row[1].flatMap({ Int64($0) }), let owner = row[2] else { return nil }
            return Lapsed(key: key, epoch: epoch, owner: owner)
        }
    }

    /// Seconds a released or lapsed lease row stays after its expiry while no download names its key.
    static let idleRetention: Double = 3_600

    /// Deletes up to `limit` lease rows idle (released or lapsed) for `idleRetention` whose key no
    /// download names and that are not `keeping` (the janitor's own row); returns how many. The
    /// epoch floor is raised first, in a transaction of its own, so that a row made again after the
    /// deletion starts above every deleted epoch; the deletion checks each row again (a key taken
    /// meanwhile is active, a download made under it names it) and only deletes epochs under the floor.
    func forgetIdle(limit: Int, keeping: String, idleFor: Double = idleRetention) throws(StateStoreError) -> Int {
        try pool.withConnection { db throws(StateStoreError) -> Int in
            let idle = "NOT l.active AND l.expires_at < now() - $1::float8 * interval '1 second' AND l.key <> $2 "
                + "AND NOT EXISTS (SELECT 1 FROM downloads AS d WHERE d.lease_key = l.key)"
            let found = try db.execute("SELECT l.key, l.epoch FROM leases AS l WHERE \(idle) ORDER BY l.expires_at LIMIT $3",
                                       [String(idleFor), keeping, String(limit)]).rows
            let keys = found.compactMap { $0[0] }
            guard let highest = found.compactMap({ $0[1].flatMap { Int64($0) } }).max(), !keys.isEmpty else { return 0 }
            try db.execute("UPDATE lease_epoch_floor SET epoch = greatest(epoch, $1::bigint)", [String(highest)])
            return try db.execute("DELETE FROM leases AS l WHERE l.key = ANY($3::text[]) AND \(idle) "
                                  + "AND l.epoch <= (SELECT epoch FROM lease_epoch_floor)",
                                  [String(idleFor), keeping, PostgresArray.literal(keys)]).affected
        }
    }

    /// The holder of `key` and its advertised URL, while its lease is unexpired.
    func holder(key: String) throws(StateStoreError) -> (owner: String, url: String, epoch: Int64)? {
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT owner, owner_url, epoch FROM leases WHERE key = $1 AND active AND expires_at > now()", [key])
        }
        guard let row = rows.rows.first, let owner = row[0], let url = row[1], let epoch = row[2].flatMap({ Int64($0) }) else {
            return nil
        }
        return (owner, url, epoch)
    }
}
