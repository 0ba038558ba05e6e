import Foundation

/// The cluster janitor's reads and writes of the database: the survey of every download the purges
/// may concern (`JanitorSurvey`, each list at most `batch` rows: what is left waits for the next
/// sweep), and the purges' writes, each one transaction fenced by the download's lease (the janitor
/// took it: nobody else holds the download meanwhile).
struct JanitorStore: Sendable {
    let pool: PostgresPool

    /// Rows a survey reads per list.
    static let batch = 256

    static let columns = "d.id, d.lease_key, d.url, d.state, d.storage, d.verified_offset, d.size, d.final_path, d.updated_at, "
        + "d.last_access, d.held, (SELECT count(*) FROM tokens AS t WHERE t.download = d.id)"

    /// What the purges of `plan` need now (`JanitorSurvey.now`): the earlier of the database's
    /// clock and `localNow` (the janitor replica's), so that neither clock running ahead alone
    /// makes anything old. `budgets`: the idle partials and cache files with their totals (only a
    /// cache budget, memory pressure or a low disk needs them).
    func survey(_ plan: JanitorPlan, localNow: Date, budgets: Bool) throws(StateStoreError) -> JanitorSurvey {
        try pool.withConnection { db throws(StateStoreError) -> JanitorSurvey in
            guard let seconds = try db.execute("SELECT extract(epoch FROM clock_timestamp())").scalar.flatMap(Double.init) else {
                throw StateStoreError(kind: .other, message: "postgres: the database's clock could not be read")
            }
            let now = min(Date(timeIntervalSince1970: seconds), localNow)
            func rows(_ condition: String, _ order: String, _ parameters: [String?] = []) throws(StateStoreError) -> [JanitorRow] {
                try db.execute("SELECT \(Self.columns) FROM downloads AS d WHERE \(condition) ORDER BY \(order), d.id LIMIT \(Self.batch)",
                               parameters).rows.compactMap(Self.row)
            }
            func number(_ sql: String) throws(StateStoreError) -> Int64 { Int64(try db.execute(sql).scalar ?? "0") ?? 0 }
            // A partial holds bytes in its prefix or in pieces kept behind an empty prefix.
            let idle = "d.state IN ('paused', 'failed') AND (d.verified_offset > 0 OR d.segments IS NOT NULL)"
            let cache = "d.state = 'completed' AND d.storage = 'cache' AND d.final_path IS NOT NULL"
            let empty = "d.state = 'paused' AND d.verified_offset = 0 AND d.segments IS NULL AND NOT d.held AND NOT EXISTS "
                + "(SELECT 1 FROM tokens AS t WHERE t.download = d.id)"
            var s = JanitorSurvey()
            s.now = now
            if budgets {
                s.idle = try rows(idle, "d.updated_at")
                s.idleBytes = try number("SELECT coalesce(sum(d.verified_offset), 0) FROM downloads AS d WHERE \(idle)")
                s.cacheFiles = try rows(cache, "d.last_access")
                s.cacheBytes = try number("SELECT coalesce(sum(d.size), 0) FROM downloads AS d WHERE \(cache)")
            }
            s.expiredPaused = try rows("d.state = 'paused' AND NOT d.held AND d.updated_at < $1", "d.updated_at",
                                       [String(plan.pausedCutoff(now: now).timeIntervalSince1970)])
            s.emptyPausedCount = Int(try number("SELECT count(*) FROM downloads AS d WHERE \(empty)"))
            if s.emptyPausedCount > plan.maxEmptyPausedDownloads { s.emptyPaused = try rows(empty, "d.updated_at") }
            s.failedCount = Int(try number("SELECT count(*) FROM downloads AS d WHERE d.state = 'failed'"))
            let failedCutoff = now.addingTimeInterval(-max(0, plan.failedRetention)).timeIntervalSince1970
            s.failed = try rows("d.state = 'failed' AND (d.updated_at < $1 OR $2)", "d.updated_at",
                                [String(failedCutoff), s.failedCount > max(1, plan.maxFailedDownloads) ? "true" : "false"])
            if let cutoff = plan.cacheCutoff(now: now) {
                s.expiredCache = try rows("\(cache) AND d.last_access <= $1", "d.last_access", [String(cutoff.timeIntervalSince1970)])
            }
            return s
        }
    }

    /// What the orphan sweep needs (`OrphanSweep`): every download's completed file in the cache
    /// area (by name) and its lease's epoch and partial, by id; and the tombstoned ids.
    func fileOwners(cacheDirectory: String, dataDirectory: String) throws(StateStoreError)
        -> (rows: [String: OrphanSweep.Row], tombstoned: Set<String>) {
        try pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                var rows: [String: OrphanSweep.Row] = [:]
                for r in try db.execute("SELECT d.id, d.final_path, l.epoch, l.part_file FROM downloads AS d "
                                        + "LEFT JOIN leases AS l ON l.key = d.lease_key").rows {
                    guard let id = r[0] else { continue }
                    func name(in directory: String) -> String? {
                        r[1].flatMap { path -> String? in
                            guard path.hasPrefix(directory + "/") else { return nil }
                            let name = path.dropFirst(directory.count + 1)
                            return name.contains("/") ? nil : String(name)
                        }
                    }
                    rows[id] = OrphanSweep.Row(cacheFile: name(in: cacheDirectory), leaseEpoch: r[2].flatMap { Int64($0) }, partFile: r[3],
                                               dataFile: name(in: dataDirectory))
                }
                let tombstoned = Set(try db.execute("SELECT id FROM tombstones").rows.compactMap { $0[0] })
                return (rows, tombstoned)
            }
        }
    }

    /// A row of `columns`; nil for one no build writes.
    static func row(_ r: [String?]) -> JanitorRow? {
        guard r.count == 12, let id = r[0], let url = r[2], let state = r[3].flatMap(DownloadState.init(rawValue:)),
              let storage = r[4].flatMap(StorageClass.init(rawValue:)), let kept = r[5].flatMap({ Int64($0) }),
              let updated = r[8].flatMap(Double.init), let access = r[9].flatMap(Double.init) else { return nil }
        return JanitorRow(id: id, leaseKey: r[1], url: url, state: state, storage: storage, keptBytes: kept, size: r[6].flatMap { Int64($0) },
                          finalPath: r[7], updatedAt: Date(timeIntervalSince1970: updated), lastAccess: Date(timeIntervalSince1970: access),
                          held: r[10] == "t", tokens: r[11].flatMap { Int($0) } ?? 0)
    }

    // MARK: Fenced writes (false: the lease no longer holds, nothing was written)

    /// Writes `download` whole (a purged partial: its kept bytes at 0), with the lease's checkpoint.
    func update(_ download: StoredDownload, fence: LeaseFence) throws(StateStoreError) -> Bool {
        var row = download
        row.fence = fence
        return try fenced(fence) { db throws(StateStoreError) in
            try db.execute(PostgresStateStore.upsertSQL, PostgresStateStore.values(of: row))
            try PostgresStateStore.checkpointLease(row, db)
        }
    }

    /// Deletes download `id` (its tokens with it), leaving `tombstone` when given.
    func delete(_ id: String, fence: LeaseFence, tombstone: Tombstone? = nil) throws(StateStoreError) -> Bool {
        try fenced(fence) { db throws(StateStoreError) in
            if let tombstone {
                _ = try PostgresStateStore.writeTombstones(StateBatch(deletions: [id], tombstones: [tombstone]), db) { _ in }
            }
            try db.execute("DELETE FROM downloads WHERE id = $1", [id])
        }
    }

    private func fenced(_ fence: LeaseFence, _ body: (PostgresConnection) throws(StateStoreError) -> Void) throws(StateStoreError) -> Bool {
        try pool.withConnection { db throws(StateStoreError) -> Bool in
            try db.transaction { () throws(StateStoreError) -> Bool in
                guard try PostgresStateStore.fenceHolds(fence, db) else { return false }
                try body(db)
                return true
            }
        }
    }
}

extension JanitorRow {
    /// The row as `download` shows it now (the survey's `leaseKey` kept): unchanged since the
    /// survey when equal to it.
    init(_ download: StoredDownload, leaseKey: String?) {
        self.init(id: download.id, leaseKey: leaseKey, url: download.url, state: download.state, storage: download.storage,
                  keptBytes: download.verifiedOffset, size: download.size, finalPath: download.finalPath, updatedAt: download.updatedAt,
                  lastAccess: download.lastAccess, held: download.held, tokens: download.tokens.count)
    }
}
