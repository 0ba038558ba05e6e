import Foundation
import Synchronization

/// The state in PostgreSQL (cluster mode): the same `StateStore` contract as `SQLiteStateStore`,
/// every replica reading and writing the one database. A commit is one transaction (durable when
/// it returns: the server's `synchronous_commit`), tokens are stored as their SHA-256 only, the
/// tombstones of removed downloads beside them (`PostgresStateStore+Tombstones`). Opening
/// migrates the schema (`PostgresSchema`, safe when replicas start at once). Connections come from
/// the replica's `PostgresPool`; a lost database throws, and the engine's `StateWriter` retries.
final class PostgresStateStore: StateStore, @unchecked Sendable {
    static let columns = ["id", "url", "storage", "state", "etag", "last_modified", "expected_total", "verified_offset",
                          "expected_sha256", "expected_size", "file_name", "final_path", "sha256", "size", "created_at",
                          "updated_at", "last_access", "error_code", "error_message", "error_http_status", "content_type",
                          "generation", "changed_at", "credential_key", "connections", "segments", "lease_key", "held",
                          "ranges_offered", "segments_refused", "client_group"]
    static let upsertSQL: String = {
        let placeholders = (1...columns.count).map { "$\($0)" }.joined(separator: ", ")
        let updates = columns.dropFirst().map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
        return "INSERT INTO downloads (\(columns.joined(separator: ", "))) VALUES (\(placeholders)) "
            + "ON CONFLICT (id) DO UPDATE SET \(updates)"
    }()

    let pool: PostgresPool
    /// Upserts refused because their lease's epoch no longer holds it (`fenceHolds`).
    let fencedRows = Atomic<Int64>(0)
    /// Removals whose tombstone a commit refused (`takeRefusedRemoval`).
    let refusedRemovals = Mutex<Set<String>>([])

    /// Opens the store on `pool`'s database and brings its schema up to date.
    init(pool: PostgresPool) throws(StateStoreError) {
        self.pool = pool
        try pool.withConnection { db throws(StateStoreError) in try PostgresSchema.migrate(db) }
    }

    func load() throws(StateStoreError) -> [StoredDownload] {
        try pool.withConnection { db throws(StateStoreError) -> [StoredDownload] in
            try db.transaction { () throws(StateStoreError) -> [StoredDownload] in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                let rows = try db.execute("SELECT \(Self.columns.joined(separator: ", ")) FROM downloads ORDER BY seq").rows
                var downloads: [StoredDownload] = []
                downloads.reserveCapacity(rows.count)
                var index: [String: Int] = [:]
                for row in rows {
                    let download = try Self.download(from: row)
                    index[download.id] = downloads.count
                    downloads.append(download)
                }
                for row in try db.execute("SELECT download, encode(hash, 'hex') FROM tokens").rows {
                    guard let id = row[0], let at = index[id], let hex = row[1],
                          let hash = PostgresArray.bytes(hex: hex).flatMap({ TokenHash(digest: $0) }) else { continue }
                    downloads[at].tokens.insert(hash)
                }
                return downloads
            }
        }
    }

    func commit(_ batch: StateBatch) throws(StateStoreError) {
        guard !batch.isEmpty else { return }
        var refused: [String] = []
        try pool.withConnection { db throws(StateStoreError) in
            try db.transaction { () throws(StateStoreError) in
                var deletions = try Self.writeTombstones(batch, db) { id in
                    fencedRows.add(1, ordering: .relaxed)
                    refused.append(id)
                }
                for (id, fence) in batch.deletionFences where deletions.contains(id) {
                    guard try !Self.fenceHolds(fence, db) else { continue }
                    deletions.removeAll { $0 == id }  // Another epoch holds it now: its row is its own.
                    fencedRows.add(1, ordering: .relaxed)
                }
                if !deletions.isEmpty {
                    try db.execute("DELETE FROM downloads WHERE id = ANY($1::text[])", [PostgresArray.literal(deletions)])
                }
                let buried = try Self.tombstoned(batch.upserts.map(\.id), db)
                for download in batch.upserts where !buried.contains(download.id) {
                    guard try Self.fenceHolds(download.fence, db) else {
                        fencedRows.add(1, ordering: .relaxed)
                        continue
                    }
                    try db.execute(Self.upsertSQL, Self.values(of: download))
                    let hashes = PostgresArray.literal(download.tokens.map { PostgresArray.hex($0.digest) })
                    try db.execute("DELETE FROM tokens WHERE download = $1 AND NOT (encode(hash, 'hex') = ANY($2::text[]))",
                                   [download.id, hashes])
                    if !download.tokens.isEmpty {
                        try db.execute("INSERT INTO tokens (download, hash) SELECT $1, decode(h, 'hex') FROM unnest($2::text[]) AS h "
                                       + "ON CONFLICT DO NOTHING", [download.id, hashes])
                    }
                    try Self.checkpointLease(download, db)
                }
            }
        }
        noteRefusedRemovals(refused)  // Once committed: the removals it refused keep their files.
    }

    /// Nothing to fold: the server keeps its own files.
    func checkpoint() throws(StateStoreError) {}

    /// The parameters of `upsertSQL` for `download`, in `columns` order.
    static func values(of d: StoredDownload) -> [String?] {
        [d.id, d.url, d.storage.rawValue, d.state.rawValue, d.validator?.etag, d.validator?.lastModified,
         d.expectedTotal.map(String.init), String(d.verifiedOffset), d.expectedSHA256, d.expectedSize.map(String.init),
         d.fileName, d.finalPath, d.sha256, d.size.map(String.init), String(d.createdAt.timeIntervalSince1970),
         String(d.updatedAt.timeIntervalSince1970), String(d.lastAccess.timeIntervalSince1970), d.error?.journalCode,
         d.error?.message, d.error?.httpStatus.map(String.init), d.contentType, String(Int64(clamping: d.generation)),
         d.changedAt.map { String($0.timeIntervalSince1970) }, d.credentialKey.map(PostgresArray.hex), String(d.connections),
         d.segments.map(SegmentJournal.text), d.fence?.key, d.held ? "true" : "false",
         d.rangesOffered.map { $0 ? "true" : "false" }, d.segmentsRefused ? "true" : "false", d.clientGroup]
    }

    /// The download a row of `columns` holds. Throws `.damaged` for values no build writes.
    static func download(from row: [String?]) throws(StateStoreError) -> StoredDownload {
        func int(_ i: Int) -> Int64? { row[i].flatMap { Int64($0) } }
        func date(_ i: Int) -> Date? { row[i].flatMap { Double($0) }.map { Date(timeIntervalSince1970: $0) } }
        guard row.count == columns.count, let id = row[0], let url = row[1],
              let storage = row[2].flatMap(StorageClass.init(rawValue:)), let state = row[3].flatMap(DownloadState.init(rawValue:)),
              let verifiedOffset = int(7), let createdAt = date(14), let updatedAt = date(15), let lastAccess = date(16) else {
            throw StateStoreError(kind: .damaged, message: "postgres: a downloads row (\(row.first.flatMap { $0 } ?? "?")) "
                                  + "holds values this build cannot read")
        }
        var validator: Validator?
        if row[4] != nil || row[5] != nil { validator = Validator(etag: row[4], lastModified: row[5]) }
        let error = row[17].map { DownloadFailure(journalCode: $0, message: row[18] ?? "", httpStatus: int(19).map { Int($0) }) }
        return StoredDownload(
            id: id, url: url, storage: storage, state: state, validator: validator, expectedTotal: int(6),
            verifiedOffset: verifiedOffset, expectedSHA256: row[8], expectedSize: int(9), fileName: row[10], finalPath: row[11],
            sha256: row[12], size: int(13), createdAt: createdAt, updatedAt: updatedAt, lastAccess: lastAccess, error: error,
            contentType: row[20], generation: UInt64(clamping: int(21) ?? 0), changedAt: date(22),
            connections: Int(clamping: int(24) ?? 1), segments: row[25].flatMap(SegmentJournal.segments),
            rangesOffered: row[28].map { $0 == "t" }, segmentsRefused: row[29] == "t",
            credentialKey: row[23].flatMap { PostgresArray.bytes(hex: $0) }, held: row[27] == "t", clientGroup: row[30])
    }
}
