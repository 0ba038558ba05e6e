import Foundation

/// What fences a row in cluster mode: the lease (key and epoch) its writer holds, and the partial
/// that epoch writes (`EpochFiles.partial`), recorded in the lease row with the durable offset.
struct LeaseFence: Sendable, Equatable {
    var key: String
    var epoch: Int64
    var partFile: String
}

// Fenced writes: a row written under a lease changes only while its epoch holds the lease.
extension PostgresStateStore {
    /// In the commit's transaction: whether `fence` (if any) still holds its lease, unexpired on the
    /// database's clock. The lease row is locked `FOR SHARE` until the commit ends, so no other
    /// replica can take the lease over between this check and the row's write; a fenced row is
    /// skipped (and counted), the rest of the batch is written.
    static func fenceHolds(_ fence: LeaseFence?, _ db: PostgresConnection) throws(StateStoreError) -> Bool {
        guard let fence else { return true }
        let held = try db.execute("SELECT 1 FROM leases WHERE key = $1 AND epoch = $2 AND active AND expires_at > now() FOR SHARE",
                                  [fence.key, String(fence.epoch)])
        return !held.rows.isEmpty
    }

    /// In the commit's transaction, after a fenced row was written: the lease records the partial in
    /// use and its durable offset (the row's `verified_offset`), what a takeover resumes from
    /// (`LeaseStore.checkpoint`'s update, in the row's transaction).
    static func checkpointLease(_ download: StoredDownload, _ db: PostgresConnection) throws(StateStoreError) {
        guard let fence = download.fence else { return }
        try db.execute("UPDATE leases SET part_file = $3, durable_offset = $4 WHERE key = $1 AND epoch = $2 AND active",
                       [fence.key, String(fence.epoch), fence.partFile, String(download.verifiedOffset)])
    }

    /// The download whose row is fenced by lease `key`, with its tokens; nil when none.
    func load(leaseKey key: String) throws(StateStoreError) -> StoredDownload? {
        try loadOne(where: "lease_key = $1", key)
    }

    /// Download `id`, with its tokens; nil when unknown.
    func load(id: String) throws(StateStoreError) -> StoredDownload? {
        try loadOne(where: "id = $1", id)
    }

    /// The lease key of download `id` (nil: unknown, or written before leases).
    func leaseKey(ofID id: String) throws(StateStoreError) -> String? {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT lease_key FROM downloads WHERE id = $1", [id])
        }.rows.first?[0] ?? nil
    }

    /// The download a caller's token (by its hash) belongs to.
    func downloadID(ofToken hash: TokenHash) throws(StateStoreError) -> String? {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT download FROM tokens WHERE hash = decode($1, 'hex')", [PostgresArray.hex(hash.digest)])
        }.rows.first?[0] ?? nil
    }

    private func loadOne(where condition: String, _ value: String) throws(StateStoreError) -> StoredDownload? {
        try pool.withConnection { db throws(StateStoreError) -> StoredDownload? in
            try db.transaction { () throws(StateStoreError) -> StoredDownload? in
                let rows = try db.execute("SELECT \(Self.columns.joined(separator: ", ")) FROM downloads WHERE \(condition) "
                                          + "ORDER BY seq LIMIT 1", [value]).rows
                guard let row = rows.first else { return nil }
                var download = try Self.download(from: row)
                for token in try db.execute("SELECT encode(hash, 'hex') FROM tokens WHERE download = $1", [download.id]).rows {
                    if let hash = token[0].flatMap(PostgresArray.bytes(hex:)).flatMap({ TokenHash(digest: $0) }) {
                        download.tokens.insert(hash)
                    }
                }
                return download
            }
        }
    }
}

extension LeaseStore {
    /// Ends the leases now without giving their transfers up (a replica shutting down), one
    /// statement per 1 000: each lapses at once, and the other replicas are told (`HandOverWatch`),
    /// so one takes each download over at once (else at its next search). A round trip per lease
    /// made a shutdown with the database unreachable take a connect timeout per lease. Returns the
    /// keys handed over (the others were fenced).
    func handOver(_ leases: [(key: String, epoch: Int64)]) throws(StateStoreError) -> Set<String> {
        var ended: Set<String> = []
        for start in stride(from: 0, to: leases.count, by: 1000) {
            let batch = leases[start..<min(start + 1000, leases.count)]
            try pool.withConnection { db throws(StateStoreError) in
                let keys = try db.execute("""
                    UPDATE leases AS l SET expires_at = now()
                    FROM unnest($1::text[], $2::bigint[]) AS r(key, epoch)
                    WHERE l.key = r.key AND l.epoch = r.epoch AND l.active
                    RETURNING l.key
                    """, [PostgresArray.literal(batch.map(\.key)), PostgresArray.literal(batch.map { String($0.epoch) })]).rows.compactMap { $0[0] }
                if !keys.isEmpty {
                    _ = try db.execute("SELECT pg_notify($1, k) FROM unnest($2::text[]) AS k", [HandOverWatch.channel, PostgresArray.literal(keys)])
                }
                ended.formUnion(keys)
            }
        }
        return ended
    }
}
