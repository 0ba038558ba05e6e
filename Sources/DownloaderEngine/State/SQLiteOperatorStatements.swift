import Foundation

/// The prepared statements of the operator's tables (`SQLiteSchema` migration 3): holds and
/// tombstones. Holds are few: the store keeps their ids in memory and writes only changes.
final class SQLiteOperatorStatements {
    private let selectHolds: SQLiteStatement
    private let insertHold: SQLiteStatement
    private let deleteHold: SQLiteStatement
    private let selectTombstones: SQLiteStatement
    private let insertTombstone: SQLiteStatement
    private let countTombstones: SQLiteStatement
    private let pruneTombstones: SQLiteStatement
    /// Ids the `operator_holds` table holds (read when opened, kept current by `write`).
    private(set) var held: Set<String> = []
    private var tombstoneCount: Int64 = 0

    init(_ db: SQLiteConnection) throws(StateStoreError) {
        selectHolds = try db.prepare("SELECT id FROM operator_holds")
        insertHold = try db.prepare("INSERT OR IGNORE INTO operator_holds (id) VALUES (?)")
        deleteHold = try db.prepare("DELETE FROM operator_holds WHERE id = ?")
        selectTombstones = try db.prepare("SELECT id, url, removed_at, removed_by, paths FROM tombstones ORDER BY removed_at")
        insertTombstone = try db.prepare("INSERT OR REPLACE INTO tombstones (id, url, removed_at, removed_by, paths) VALUES (?, ?, ?, ?, ?)")
        countTombstones = try db.prepare("SELECT count(*) FROM tombstones")
        pruneTombstones = try db.prepare("DELETE FROM tombstones WHERE id IN (SELECT id FROM tombstones ORDER BY removed_at LIMIT ?)")
        try selectHolds.forEachRow { row in
            if let id = row.text(0) { held.insert(id) }
        }
        tombstoneCount = try countTombstones.firstInt64() ?? 0
    }

    /// Within the caller's transaction: the holds of `upserts` and `deletions` as they are now, and
    /// `tombstones` added (the oldest pruned beyond `Tombstone.limit`). `commit` adopts the new
    /// hold set once the transaction committed.
    func write(upserts: [StoredDownload], deletions: [String], tombstones: [Tombstone]) throws(StateStoreError) -> Set<String> {
        var held = self.held
        for download in upserts where download.held != held.contains(download.id) {
            let s = download.held ? insertHold : deleteHold
            s.bind(1, download.id)
            try s.run()
            if download.held { held.insert(download.id) } else { held.remove(download.id) }
        }
        for id in deletions where held.contains(id) {
            deleteHold.bind(1, id)
            try deleteHold.run()
            held.remove(id)
        }
        for tombstone in tombstones {
            let s = insertTombstone
            s.bind(1, tombstone.id)
            s.bind(2, tombstone.url)
            s.bind(3, tombstone.removedAt.timeIntervalSince1970)
            s.bind(4, tombstone.by.rawValue)
            s.bind(5, tombstone.paths.joined(separator: "\n"))
            try s.run()
        }
        if !tombstones.isEmpty {
            let count = tombstoneCount + Int64(tombstones.count)
            if count > Int64(Tombstone.limit) {
                pruneTombstones.bind(1, count - Int64(Tombstone.limit))
                try pruneTombstones.run()
            }
        }
        return held
    }

    /// After the transaction committed: what it wrote is now the truth.
    func committed(held: Set<String>, tombstones: Int) {
        self.held = held
        tombstoneCount = min(Int64(Tombstone.limit), tombstoneCount + Int64(tombstones))
    }

    func loadTombstones() throws(StateStoreError) -> [Tombstone] {
        var found: [Tombstone] = []
        try selectTombstones.forEachRow { row in
            guard let id = row.text(0), let url = row.text(1) else { return }
            let by = row.text(3).flatMap(RemovalCause.init(rawValue:)) ?? .operator
            let paths = (row.text(4) ?? "").split(separator: "\n").map(String.init)
            found.append(Tombstone(id: id, url: url, removedAt: Date(timeIntervalSince1970: row.double(2)), by: by, paths: paths))
        }
        return found
    }
}
