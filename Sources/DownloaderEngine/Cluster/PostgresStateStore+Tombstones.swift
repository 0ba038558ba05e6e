import Foundation

// Tombstones in PostgreSQL (`PostgresSchema` migration 6): written with the row's deletion, in the
// commit's transaction, fenced by the remover's lease; a tombstoned id is never written again.
extension PostgresStateStore {
    /// In the commit's transaction, before anything else: the tombstones whose fence no longer holds
    /// are dropped with their rows' deletions (counted as fenced: the removal was decided under a
    /// lease that is gone, and the new holder's row stays); the others are written, the oldest
    /// pruned beyond `Tombstone.limit`. Returns the deletions to make.
    static func writeTombstones(_ batch: StateBatch, _ db: PostgresConnection,
                                fenced: (_ id: String) -> Void) throws(StateStoreError) -> [String] {
        guard !batch.tombstones.isEmpty else { return batch.deletions }
        var refused = Set<String>()
        for tombstone in batch.tombstones {
            guard try fenceHolds(tombstone.fence, db) else {
                refused.insert(tombstone.id)
                fenced(tombstone.id)
                continue
            }
            try db.execute("INSERT INTO tombstones (id, url, removed_at, removed_by, paths) VALUES ($1, $2, $3, $4, $5) "
                           + "ON CONFLICT (id) DO UPDATE SET removed_at = EXCLUDED.removed_at, removed_by = EXCLUDED.removed_by, "
                           + "paths = EXCLUDED.paths",
                           [tombstone.id, tombstone.url, String(tombstone.removedAt.timeIntervalSince1970), tombstone.by.rawValue,
                            tombstone.paths.joined(separator: "\n")])
        }
        if batch.tombstones.count > refused.count {
            try db.execute("DELETE FROM tombstones WHERE seq <= (SELECT seq FROM tombstones ORDER BY seq DESC OFFSET $1 LIMIT 1)",
                           [String(Tombstone.limit)])
        }
        return refused.isEmpty ? batch.deletions : batch.deletions.filter { !refused.contains($0) }
    }

    /// Whether the removal of `id` was refused by a commit (its tombstone's lease was gone: the row
    /// stays, the new holder's), taking it off the list. Its files stay with the row that names them.
    func takeRefusedRemoval(_ id: String) -> Bool {
        refusedRemovals.withLock { $0.remove(id) != nil }
    }

    /// After a commit: removals it refused, for `takeRefusedRemoval` (bounded: the oldest asked
    /// about least go first; each is asked about once, right after its commit).
    func noteRefusedRemovals(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        refusedRemovals.withLock { refused in
            if refused.count + ids.count > Self.refusedRemovalLimit { refused.removeAll() }
            refused.formUnion(ids)
        }
    }

    static let refusedRemovalLimit = 4_096

    /// In the commit's transaction: which of `ids` have a tombstone (their rows are never written again).
    static func tombstoned(_ ids: [String], _ db: PostgresConnection) throws(StateStoreError) -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let rows = try db.execute("SELECT id FROM tombstones WHERE id = ANY($1::text[])", [PostgresArray.literal(ids)]).rows
        return Set(rows.compactMap { $0[0] })
    }

    func loadTombstones() throws(StateStoreError) -> [Tombstone] {
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT id, url, removed_at, removed_by, paths FROM tombstones ORDER BY seq")
        }.rows
        return rows.compactMap(Self.tombstone)
    }

    /// Who removed each of `ids` that has a tombstone.
    func removers(of ids: [String]) throws(StateStoreError) -> [String: RemovalCause] {
        try pool.withConnection { db throws(StateStoreError) in try Self.removers(of: ids, db) }
    }

    static func removers(of ids: [String], _ db: PostgresConnection) throws(StateStoreError) -> [String: RemovalCause] {
        guard !ids.isEmpty else { return [:] }
        var found: [String: RemovalCause] = [:]
        for row in try db.execute("SELECT id, removed_by FROM tombstones WHERE id = ANY($1::text[])", [PostgresArray.literal(ids)]).rows {
            if let id = row[0], let by = row[1].flatMap(RemovalCause.init(rawValue:)) { found[id] = by }
        }
        return found
    }

    /// A row of `id, url, removed_at, removed_by, paths`; nil for one no build writes.
    static func tombstone(_ row: [String?]) -> Tombstone? {
        guard row.count == 5, let id = row[0], let url = row[1], let at = row[2].flatMap(Double.init) else { return nil }
        return Tombstone(id: id, url: url, removedAt: Date(timeIntervalSince1970: at),
                         by: row[3].flatMap(RemovalCause.init(rawValue:)) ?? .operator,
                         paths: (row[4] ?? "").split(separator: "\n").map(String.init))
    }
}
