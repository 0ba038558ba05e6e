import Foundation

/// The cluster database's side of the cluster-wide event feed (`ClusterFeed`, tables of
/// `PostgresSchema` migration 8): stamping changed rows with versions in commit order, reading
/// what was stamped above a cursor, and the starting point.
///
/// Why stamps and not a version taken by the writer: a version taken inside the writer's
/// transaction becomes visible when that transaction commits, so a reader can see 12 before 11
/// and, moving its cursor to 12, never see 11. Here writers only clear `feed_seq` (a trigger, no
/// extra statement) and stampers (any replica, one at a time under an advisory lock, skipping
/// rows a writer holds) number what is committed: a stamper's numbers are visible before the next
/// stamper takes the lock, so the stamps any reader sees are a prefix of the sequence.
struct ClusterFeedStore: Sendable {
    let pool: PostgresPool

    /// `pg_advisory_xact_lock` key of the stampers ("dlsvfeed").
    static let stampLock: Int64 = 0x646C_7376_6665_6564
    /// Rows (and removals) stamped by one stamper, read by one `changes`.
    static let batch = 2_000
    /// Removals are kept this long for replicas that were cut off from the database.
    static let removalsKept = "1 day"

    /// A change above the cursor: a row as it is now, or a removed download.
    struct Change: Sendable, Equatable {
        var version: UInt64
        var id: String
        /// nil: the row was deleted.
        var row: ClusterRow?
        var removedBy: RemovalCause?
    }

    /// Numbers what was committed unstamped (nothing when another replica is stamping now: its
    /// numbers come soon). Returns the rows and removals stamped.
    @discardableResult
    func stamp() throws(StateStoreError) -> Int {
        try pool.withConnection { db throws(StateStoreError) -> Int in
            try db.transaction { () throws(StateStoreError) -> Int in
                guard try db.execute("SELECT pg_try_advisory_xact_lock($1)", [String(Self.stampLock)]).scalar == "t" else { return 0 }
                let rows = try db.execute("""
                    UPDATE downloads SET feed_seq = nextval('feed_versions') WHERE id IN (SELECT id FROM downloads
                    WHERE feed_seq IS NULL LIMIT \(Self.batch) FOR UPDATE SKIP LOCKED) RETURNING 1
                    """).rows.count
                let removals = try db.execute("""
                    UPDATE feed_removals SET feed_seq = nextval('feed_versions') WHERE n IN (SELECT n FROM feed_removals
                    WHERE feed_seq IS NULL ORDER BY n LIMIT \(Self.batch) FOR UPDATE SKIP LOCKED) RETURNING 1
                    """).rows.count
                try db.execute("DELETE FROM feed_removals WHERE removed_at < now() - interval '\(Self.removalsKept)'")
                return rows + removals
            }
        }
    }

    /// Every download as it is now, and the newest version stamped, read consistently: the feed
    /// starts there (rows not stamped yet come again, stamped above it).
    func start() throws(StateStoreError) -> (version: UInt64, rows: [ClusterRow]) {
        try pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                let newest = try db.execute("SELECT greatest(coalesce((SELECT max(feed_seq) FROM downloads), 0), "
                                            + "coalesce((SELECT max(feed_seq) FROM feed_removals), 0))").scalar
                let rows = try db.execute(ClusterReader.select + " ORDER BY d.created_at, d.id").rows
                return (UInt64(newest ?? "0") ?? 0, try rows.map { row throws(StateStoreError) in try ClusterReader.row(row) })
            }
        }
    }

    /// The changes stamped above `version`, in version order (at most `batch` rows and `batch`
    /// removals, cut where either ran out so that nothing in between is skipped); `more` when
    /// there may be others.
    func changes(after version: UInt64) throws(StateStoreError) -> (changes: [Change], more: Bool) {
        let select = "SELECT d.feed_seq, " + String(ClusterReader.select.dropFirst("SELECT ".count))
        let (rows, removals) = try pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                let rows = try db.execute(select + " WHERE d.feed_seq > $1 ORDER BY d.feed_seq LIMIT \(Self.batch)",
                                          [String(version)]).rows
                let removals = try db.execute("SELECT r.feed_seq, r.id, t.removed_by FROM feed_removals AS r LEFT JOIN tombstones AS t "
                                              + "ON t.id = r.id WHERE r.feed_seq > $1 ORDER BY r.feed_seq LIMIT \(Self.batch)",
                                              [String(version)]).rows
                return (rows, removals)
            }
        }
        var changes: [Change] = []
        for row in rows {
            guard let seq = row[0].flatMap({ UInt64($0) }) else { continue }
            let parsed = try ClusterReader.row(Array(row.dropFirst()))
            changes.append(Change(version: seq, id: parsed.stored.id, row: parsed))
        }
        for row in removals {
            guard let seq = row[0].flatMap({ UInt64($0) }), let id = row[1] else { continue }
            changes.append(Change(version: seq, id: id, removedBy: row[2].flatMap(RemovalCause.init(rawValue:))))
        }
        changes.sort { $0.version < $1.version }
        // A full batch may stop short of the other's versions: keep only what both cover.
        var limit = UInt64.max
        if rows.count == Self.batch, let last = rows.last?[0].flatMap({ UInt64($0) }) { limit = min(limit, last) }
        if removals.count == Self.batch, let last = removals.last?[0].flatMap({ UInt64($0) }) { limit = min(limit, last) }
        return (changes.filter { $0.version <= limit }, limit != .max)
    }
}
