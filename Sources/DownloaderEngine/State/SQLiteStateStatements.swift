import Foundation

/// The state store's prepared statements (prepared once, when the database opens) and the mapping
/// between a `StoredDownload` and its row in `downloads` (schema: `SQLiteSchema`).
final class SQLiteStateStatements {
    static let columns = "row, id, url, storage, state, etag, last_modified, expected_total, verified_offset, "
        + "expected_sha256, expected_size, file_name, final_path, sha256, size, created_at, updated_at, last_access, "
        + "error_code, error_message, error_http_status, content_type, generation, changed_at, credential_key, "
        + "connections, segments, ranges_offered, segments_refused, client_group"

    let begin: SQLiteStatement
    let commit: SQLiteStatement
    let rollback: SQLiteStatement
    let checkpoint: SQLiteStatement
    let selectDownloads: SQLiteStatement
    let selectAllTokens: SQLiteStatement
    let selectRows: SQLiteStatement
    private let selectCount: SQLiteStatement
    private let replaceDownload: SQLiteStatement
    private let deleteDownload: SQLiteStatement
    private let selectTokens: SQLiteStatement
    private let insertToken: SQLiteStatement
    private let deleteToken: SQLiteStatement
    private let deleteTokens: SQLiteStatement

    init(_ db: SQLiteConnection) throws(StateStoreError) {
        begin = try db.prepare("BEGIN IMMEDIATE")
        commit = try db.prepare("COMMIT")
        rollback = try db.prepare("ROLLBACK")
        checkpoint = try db.prepare("PRAGMA wal_checkpoint(TRUNCATE)")
        selectDownloads = try db.prepare("SELECT \(Self.columns) FROM downloads ORDER BY row")
        selectAllTokens = try db.prepare("SELECT download, hash FROM tokens ORDER BY download")
        selectRows = try db.prepare("SELECT row, id FROM downloads")
        selectCount = try db.prepare("SELECT count(*) FROM downloads")
        let placeholders = Array(repeating: "?", count: 30).joined(separator: ", ")
        replaceDownload = try db.prepare("INSERT OR REPLACE INTO downloads (\(Self.columns)) VALUES (\(placeholders))")
        deleteDownload = try db.prepare("DELETE FROM downloads WHERE row = ?")
        selectTokens = try db.prepare("SELECT hash FROM tokens WHERE download = ?")
        insertToken = try db.prepare("INSERT OR IGNORE INTO tokens (download, hash) VALUES (?, ?)")
        deleteToken = try db.prepare("DELETE FROM tokens WHERE download = ? AND hash = ?")
        deleteTokens = try db.prepare("DELETE FROM tokens WHERE download = ?")
    }

    /// Writes `download` whole at `row`. Its tokens: all inserted for a new row (`known` false);
    /// for a known one only the difference to what is stored is written.
    func write(_ download: StoredDownload, row: Int64, known: Bool) throws(StateStoreError) {
        let s = replaceDownload
        s.bind(1, row)
        s.bind(2, download.id)
        s.bind(3, download.url)
        s.bind(4, download.storage.rawValue)
        s.bind(5, download.state.rawValue)
        s.bind(6, download.validator?.etag)
        s.bind(7, download.validator?.lastModified)
        s.bind(8, download.expectedTotal)
        s.bind(9, download.verifiedOffset)
        s.bind(10, download.expectedSHA256)
        s.bind(11, download.expectedSize)
        s.bind(12, download.fileName)
        s.bind(13, download.finalPath)
        s.bind(14, download.sha256)
        s.bind(15, download.size)
        s.bind(16, download.createdAt.timeIntervalSince1970)
        s.bind(17, download.updatedAt.timeIntervalSince1970)
        s.bind(18, download.lastAccess.timeIntervalSince1970)
        s.bind(19, download.error?.journalCode)
        s.bind(20, download.error?.message)
        s.bind(21, download.error?.httpStatus.map(Int64.init))
        s.bind(22, download.contentType)
        s.bind(23, Int64(clamping: download.generation))
        s.bind(24, download.changedAt?.timeIntervalSince1970)
        if let key = download.credentialKey { s.bind(25, bytes: key) } else { s.bind(25, nil as Int64?) }
        s.bind(26, Int64(download.connections))
        s.bind(27, download.segments.map(SegmentJournal.text))
        s.bind(28, download.rangesOffered.map { $0 ? 1 : 0 } as Int64?)
        s.bind(29, download.segmentsRefused ? 1 : 0 as Int64)
        s.bind(30, download.clientGroup)
        try s.run()
        var stored: Set<TokenHash> = []
        if known {
            selectTokens.bind(1, row)
            try selectTokens.forEachRow { found in
                if let hash = TokenHash(digest: found.bytes(0)) { stored.insert(hash) }
            }
        }
        for hash in stored.subtracting(download.tokens) {
            deleteToken.bind(1, row)
            deleteToken.bind(2, bytes: hash.digest)
            try deleteToken.run()
        }
        for hash in download.tokens.subtracting(stored) {
            insertToken.bind(1, row)
            insertToken.bind(2, bytes: hash.digest)
            try insertToken.run()
        }
    }

    /// How many downloads are stored.
    func countDownloads() throws(StateStoreError) -> Int64 {
        try selectCount.firstInt64() ?? 0
    }

    /// Removes the download at `row` and its tokens.
    func delete(row: Int64) throws(StateStoreError) {
        deleteTokens.bind(1, row)
        try deleteTokens.run()
        deleteDownload.bind(1, row)
        try deleteDownload.run()
    }

    /// The download in the row `select` (over `columns`) stands on. Throws `.damaged` for values
    /// no build writes.
    func download(from select: SQLiteStatement) throws(StateStoreError) -> StoredDownload {
        let row = select.int64(0) ?? 0
        guard let id = select.text(1), let url = select.text(2),
              let storage = select.text(3).flatMap(StorageClass.init(rawValue:)),
              let state = select.text(4).flatMap(DownloadState.init(rawValue:)),
              let verifiedOffset = select.int64(8) else {
            throw StateStoreError(kind: .damaged, message: "sqlite: downloads row \(row) holds values this build cannot read")
        }
        var validator: Validator?
        let etag = select.text(5)
        let lastModified = select.text(6)
        if etag != nil || lastModified != nil { validator = Validator(etag: etag, lastModified: lastModified) }
        var error: DownloadFailure?
        if let code = select.text(18) {
            error = DownloadFailure(journalCode: code, message: select.text(19) ?? "", httpStatus: select.int64(20).map { Int($0) })
        }
        return StoredDownload(
            id: id, url: url, storage: storage, state: state, validator: validator, expectedTotal: select.int64(7),
            verifiedOffset: verifiedOffset, expectedSHA256: select.text(9), expectedSize: select.int64(10),
            fileName: select.text(11), finalPath: select.text(12), sha256: select.text(13), size: select.int64(14),
            createdAt: Date(timeIntervalSince1970: select.double(15)), updatedAt: Date(timeIntervalSince1970: select.double(16)),
            lastAccess: Date(timeIntervalSince1970: select.double(17)), error: error, contentType: select.text(21),
            generation: UInt64(clamping: select.int64(22) ?? 0),
            changedAt: select.isNull(23) ? nil : Date(timeIntervalSince1970: select.double(23)),
            connections: Int(clamping: select.int64(25) ?? 1), segments: select.text(26).flatMap(SegmentJournal.segments),
            rangesOffered: select.int64(27).map { $0 != 0 }, segmentsRefused: select.int64(28) == 1,
            credentialKey: select.isNull(24) ? nil : Array(select.bytes(24)), clientGroup: select.text(29))
    }
}
