import Foundation

/// The cluster database's side of the cluster-wide event feed (`ClusterFeed`, tables of
/// `PostgresSchema` migration 8): stamping changes with versions in commit order, reading what was
/// stamped above a cursor, and the starting point.
///
/// Two kinds of change, both written by triggers in the writer's own statement (no extra round
/// trip for the engine's state writer or the heartbeat):
/// - `feed_log` entries, one per lifecycle change (created, a new state or body version, deleted),
///   never overwritten: every replica reads every one, so each tells the same lifecycle event under
///   the same id;
/// - a row's `feed_seq`, cleared by any other change of it (bytes, callers, rate: the heartbeat
///   twice a second): its progress, the row as it is when read (progress is the newest anyway).
///
/// Why stamps and not a version taken by the writer: a version taken inside the writer's
/// transaction becomes visible when that transaction commits, so a reader can see 12 before 11
/// and, moving its cursor to 12, never see 11. Here stampers (any replica, one at a time under an
/// advisory lock, skipping rows a writer holds) number what is committed, log entries first: a
/// stamper's numbers are visible before the next stamper takes the lock, so the stamps any reader
/// sees are a prefix of the sequence.
///
/// A row is stamped only once none of its log entries waits for a stamp: each statement of the
/// stamper sees what committed before it began, so a writer committing between the log statement
/// and the rows statement would otherwise have its row numbered before its `created` entry, and a
/// reader that met the row first would take the download as known and never tell it created.
struct ClusterFeedStore: Sendable {
    let pool: PostgresPool

    /// `pg_advisory_xact_lock` key of the stampers ("dlsvfeed").
    static let stampLock: Int64 = 0x646C_7376_6665_6564
    /// Rows (and log entries) stamped by one stamper, read by one `changes`.
    static let batch = 2_000
    /// Log entries are kept this long (for replicas that were cut off from the database a while).
    static let logKept = "1 day"

    /// A change above the cursor.
    struct Change: Sendable, Equatable {
        enum Kind: Sendable, Equatable {
            /// The row changed (its progress): as it is now.
            case row
            case created(DownloadState)
            case changed(from: DownloadState, fromGeneration: UInt64, to: DownloadState, toGeneration: UInt64)
            /// Deleted; by whom its tombstone says (nil: none).
            case removed(by: RemovalCause?)
        }

        var version: UInt64
        var id: String
        var kind: Kind
        /// The download's row as it is now (nil: gone).
        var row: ClusterRow?
    }

    /// Numbers what was committed unstamped (nothing when another replica is stamping now: its
    /// numbers come soon). Returns the log entries and rows stamped.
    @discardableResult
    func stamp() throws(StateStoreError) -> Int {
        try pool.withConnection { db throws(StateStoreError) -> Int in
            try db.transaction { () throws(StateStoreError) -> Int in
                guard try db.execute("SELECT pg_try_advisory_xact_lock($1)", [String(Self.stampLock)]).scalar == "t" else { return 0 }
                let log = try db.execute("""
                    UPDATE feed_log SET feed_seq = nextval('feed_versions') WHERE n IN (SELECT n FROM feed_log
                    WHERE feed_seq IS NULL ORDER BY n LIMIT \(Self.batch) FOR UPDATE SKIP LOCKED) RETURNING 1
                    """).rows.count
                let rows = try db.execute("""
                    UPDATE downloads SET feed_seq = nextval('feed_versions') WHERE id IN (SELECT id FROM downloads AS d
                    WHERE feed_seq IS NULL AND NOT EXISTS (SELECT 1 FROM feed_log AS g WHERE g.id = d.id AND g.feed_seq IS NULL)
                    LIMIT \(Self.batch) FOR UPDATE SKIP LOCKED) RETURNING 1
                    """).rows.count
                // The oldest stamped entries by `n` (the primary key: no scan of the table, which
                // has no index on `at`), those past the retention, at most a batch a round.
                try db.execute("""
                    DELETE FROM feed_log WHERE n IN (SELECT n FROM feed_log WHERE feed_seq IS NOT NULL ORDER BY n LIMIT \(Self.batch))
                    AND at < now() - interval '\(Self.logKept)'
                    """)
                return log + rows
            }
        }
    }

    /// Every download as it is now, and the newest version stamped, read consistently: the feed
    /// starts there (changes not stamped yet come later, stamped above it).
    func start() throws(StateStoreError) -> (version: UInt64, rows: [ClusterRow]) {
        try pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                let newest = try db.execute("SELECT greatest(coalesce((SELECT max(feed_seq) FROM downloads), 0), "
                                            + "coalesce((SELECT max(feed_seq) FROM feed_log), 0))").scalar
                let rows = try db.execute(ClusterReader.select + " ORDER BY d.created_at, d.id").rows
                return (UInt64(newest ?? "0") ?? 0, try rows.map { row throws(StateStoreError) in try ClusterReader.row(row) })
            }
        }
    }

    /// The changes stamped above `version`, in version order (at most `batch` rows and `batch` log
    /// entries, cut where either ran out so that nothing in between is skipped); `more` when there
    /// may be others. A log entry comes with its download's row as it is now.
    func changes(after version: UInt64) throws(StateStoreError) -> (changes: [Change], more: Bool) {
        let select = "SELECT d.feed_seq, " + String(ClusterReader.select.dropFirst("SELECT ".count))
        let (rows, log, current) = try pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                let rows = try db.execute(select + " WHERE d.feed_seq > $1 ORDER BY d.feed_seq LIMIT \(Self.batch)", [String(version)]).rows
                let log = try db.execute("SELECT g.feed_seq, g.id, g.kind, g.old_state, g.new_state, g.old_generation, g.new_generation, "
                                         + "t.removed_by FROM feed_log AS g LEFT JOIN tombstones AS t ON t.id = g.id AND g.kind = 'removed' "
                                         + "WHERE g.feed_seq > $1 ORDER BY g.feed_seq LIMIT \(Self.batch)", [String(version)]).rows
                let ids = Array(Set(log.compactMap { $0[1] }))
                let current = ids.isEmpty ? [] : try db.execute(select + " WHERE d.id = ANY($1::text[])", [PostgresArray.literal(ids)]).rows
                return (rows, log, current)
            }
        }
        var now: [String: ClusterRow] = [:]
        for row in current {
            let parsed = try ClusterReader.row(Array(row.dropFirst()))
            now[parsed.stored.id] = parsed
        }
        var changes: [Change] = []
        for row in rows {
            guard let seq = row[0].flatMap({ UInt64($0) }) else { continue }
            let parsed = try ClusterReader.row(Array(row.dropFirst()))
            changes.append(Change(version: seq, id: parsed.stored.id, kind: .row, row: parsed))
        }
        for entry in log {
            guard let seq = entry[0].flatMap({ UInt64($0) }), let id = entry[1], let kind = Self.kind(entry) else { continue }
            changes.append(Change(version: seq, id: id, kind: kind, row: now[id]))
        }
        changes.sort { $0.version < $1.version }
        // A full batch may stop short of the other's versions: keep only what both cover.
        var limit = UInt64.max
        if rows.count == Self.batch, let last = rows.last?[0].flatMap({ UInt64($0) }) { limit = min(limit, last) }
        if log.count == Self.batch, let last = log.last?[0].flatMap({ UInt64($0) }) { limit = min(limit, last) }
        return (changes.filter { $0.version <= limit }, limit != .max)
    }

    /// A `feed_log` entry's kind (columns 2...7 of `changes`' query); nil for one no build writes.
    static func kind(_ entry: [String?]) -> Change.Kind? {
        let state = { (i: Int) in entry[i].flatMap(DownloadState.init(rawValue:)) }
        let generation = { (i: Int) in entry[i].flatMap { UInt64($0) } ?? 0 }
        switch entry[2] {
        case "created": return state(4).map { .created($0) }
        case "removed": return .removed(by: entry[7].flatMap(RemovalCause.init(rawValue:)))
        case "changed":
            guard let from = state(3), let to = state(4) else { return nil }
            return .changed(from: from, fromGeneration: generation(5), to: to, toGeneration: generation(6))
        default: return nil
        }
    }
}
