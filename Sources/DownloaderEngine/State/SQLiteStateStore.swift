import Basics
import Foundation
import Glibc

/// The state in SQLite: `<state dir>/state.db` (mode 0600), in WAL mode with `synchronous=FULL`, so
/// every commit is on stable storage when it returns (the WAL is fsynced; commits are batched by
/// `StateWriter`, at most five a second plus the flushes before a publishing rename). Opening checks
/// the file (`PRAGMA integrity_check`) and brings its schema up to date (`SQLiteSchema`); a damaged
/// file is renamed aside (with its `-wal`), never deleted, and an empty database takes its place.
/// Rows are keyed by insertion order (`row`); the id → row map is kept here in memory.
final class SQLiteStateStore: StateStore, @unchecked Sendable {
    static let fileName = "state.db"
    /// `integrity_check` (rather than `quick_check`): 100 000 downloads check in about 0.1 s.
    static let integrityPragma = "PRAGMA integrity_check"

    /// What opening found: the store; where a damaged database was kept aside at this opening, and
    /// why; and every damaged database kept in the directory (this one and earlier ones).
    struct Opening {
        let store: SQLiteStateStore
        var damagedKeptAt: String?
        var damage: String?
        var damagedKept: [String] = []
    }

    let path: String
    let db: SQLiteConnection
    let statements: SQLiteStateStatements
    /// Holds and tombstones (issue 14).
    let operatorStatements: SQLiteOperatorStatements
    /// Row of every recorded download (read by `load`, or by the first commit before it; kept
    /// current by `commit`).
    private var rows: [String: Int64]?
    /// What the last `load` read (id, row), until the first commit makes `rows` of it.
    private var loaded: [(String, Int64)]?
    private var nextRow: Int64 = 1
    /// Rows of an id an earlier row holds already (none is written so; an older release's journal
    /// import could): start-up keeps the first, and the next commit deletes these.
    private var duplicateRows: [Int64] = []
    /// Crash tests: SIGKILL the process half-way through this commit (1-based; before its COMMIT).
    private let crashAtCommit: Int?
    private var commits = 0

    /// Opens `state.db` in `directory`. A damaged file is kept aside and replaced by an empty one;
    /// any other failure (a newer schema, permissions, a full disk) throws.
    static func open(directory: String, crashAtCommit: Int? = nil) throws(StateStoreError) -> Opening {
        var opening = try openOrSetAside(directory: directory, crashAtCommit: crashAtCommit)
        opening.damagedKept = keptDamaged(in: directory)
        return opening
    }

    /// Damaged databases kept in `directory` (`state.db.damaged`, `state.db.damaged-2`, …).
    static func keptDamaged(in directory: String) -> [String] {
        let prefix = fileName + ".damaged"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(prefix) && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.sorted()
            .map { directory + "/" + $0 }
    }

    private static func openOrSetAside(directory: String, crashAtCommit: Int?) throws(StateStoreError) -> Opening {
        let path = directory + "/" + fileName
        do {
            return Opening(store: try SQLiteStateStore(path: path, crashAtCommit: crashAtCommit))
        } catch where error.kind == .damaged {
            let aside: String
            do throws(SystemError) {
                aside = try FileStore.setAside(path, suffix: ".damaged", companions: ["-wal", "-shm"])
            } catch {
                throw StateStoreError(kind: .other, message: "the state database \(path) is damaged (\(error)) and could not be set aside: \(error)")
            }
            return Opening(store: try SQLiteStateStore(path: path, crashAtCommit: crashAtCommit), damagedKeptAt: aside,
                           damage: error.message)
        }
    }

    private init(path: String, crashAtCommit: Int?) throws(StateStoreError) {
        self.path = path
        self.crashAtCommit = crashAtCommit
        // Created here first, so that it (and the -wal and -shm SQLite derives from it) is 0600.
        do throws(SystemError) {
            Glibc.close(try syscall("open \(path)") { Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600) })
        } catch {
            throw StateStoreError(kind: error.isNoSpace ? .full : .other, message: "the state database: \(error)")
        }
        db = try SQLiteConnection(path: path)
        try db.execute("PRAGMA busy_timeout = 5000")
        let mode = try db.text("PRAGMA journal_mode = WAL")
        guard mode == "wal" else {
            throw StateStoreError(kind: .other, message: "sqlite: \(path) cannot use WAL mode (journal_mode is \(mode ?? "?"))")
        }
        try db.execute("PRAGMA synchronous = FULL")
        let integrity = try db.text(Self.integrityPragma)
        guard integrity == "ok" else {
            throw StateStoreError(kind: .damaged, message: "sqlite: \(path) failed its integrity check: \(integrity ?? "no answer")")
        }
        try SQLiteSchema.migrate(db)
        statements = try SQLiteStateStatements(db)
        operatorStatements = try SQLiteOperatorStatements(db)
    }

    /// Every download, read in batches (`load(batchSize:_:)`) and collected.
    func load() throws(StateStoreError) -> [StoredDownload] {
        var downloads: [StoredDownload] = []
        try load(batchSize: 4096) { batch, _ in downloads += batch }
        return downloads
    }

    /// Steps the downloads and their tokens together (both in `row` order: a merge, no lookups),
    /// handing each batch on as soon as it is full. The id → row map the commits need is built
    /// from what was read at the first commit, on the writer thread, not here: start-up does not
    /// wait for it.
    func load(batchSize: Int, _ body: (_ batch: [StoredDownload], _ total: Int) -> Void) throws(StateStoreError) {
        let size = max(1, batchSize)
        let count = Int(try statements.countDownloads())
        let held = operatorStatements.held
        var order: [(String, Int64)] = []
        order.reserveCapacity(count)
        let select = statements.selectDownloads
        let tokens = statements.selectAllTokens
        defer {
            select.reset()
            tokens.reset()
        }
        // The token the merge stands on: its download's row, and the hash (nil: unreadable, skipped).
        func nextToken() throws(StateStoreError) -> (row: Int64, hash: TokenHash?)? {
            guard try tokens.step(), let row = tokens.int64(0) else { return nil }
            return (row, TokenHash(digest: tokens.bytes(1)))
        }
        var token = try nextToken()
        var batch: [StoredDownload] = []
        batch.reserveCapacity(min(size, count))
        while try select.step() {
            let row = select.int64(0) ?? 0
            var download = try statements.download(from: select)  // Moved in, not copied.
            while let (at, hash) = token, at <= row {
                if at == row, let hash { download.tokens.insert(hash) }
                token = try nextToken()
            }
            if !held.isEmpty && held.contains(download.id) { download.held = true }
            order.append((download.id, row))
            batch.append(download)
            if batch.count == size {
                body(batch, count)
                batch = []
                batch.reserveCapacity(size)
            }
        }
        if !batch.isEmpty { body(batch, count) }
        rows = nil
        loaded = order
    }

    /// The id → row map: from the last `load`, or read from the table when there was none (a
    /// commit before the load).
    private func rowMap() throws(StateStoreError) -> [String: Int64] {
        if let rows { return rows }
        var found: [String: Int64] = [:]
        var duplicates: [Int64] = []
        var highest: Int64 = 0
        func add(_ id: String, _ row: Int64) {
            highest = max(highest, row)
            guard let first = found[id] else {
                found[id] = row
                return
            }
            // The first row stands, as start-up keeps the first (rows come in `row` order).
            duplicates.append(max(first, row))
            found[id] = min(first, row)
        }
        if let loaded {
            found.reserveCapacity(loaded.count)
            for (id, row) in loaded { add(id, row) }
        } else {
            try statements.selectRows.forEachRow { select in
                if let row = select.int64(0), let id = select.text(1) { add(id, row) }
            }
        }
        loaded = nil
        rows = found
        duplicateRows = duplicates
        nextRow = highest + 1
        return found
    }

    func loadTombstones() throws(StateStoreError) -> [Tombstone] {
        try operatorStatements.loadTombstones()
    }

    /// Copies the WAL into `state.db` and truncates it (`wal_checkpoint(TRUNCATE)`).
    func checkpoint() throws(StateStoreError) {
        try statements.checkpoint.run()
    }

    func commit(_ batch: StateBatch) throws(StateStoreError) {
        guard !batch.isEmpty else { return }
        var rows = try rowMap()
        commits += 1
        let crashAfter = commits == crashAtCommit ? max(1, (batch.upserts.count + batch.deletions.count) / 2) : nil
        var done = 0
        func step() {
            done += 1
            if done == crashAfter { kill(getpid(), SIGKILL) }
        }
        var assigned: [String: Int64] = [:]
        var next = nextRow
        var heldAfter = operatorStatements.held
        try statements.begin.run()
        do throws(StateStoreError) {
            for row in duplicateRows { try statements.delete(row: row) }
            for id in batch.deletions {
                if let row = rows[id] { try statements.delete(row: row) }
                step()
            }
            for download in batch.upserts {
                if let row = rows[download.id] ?? assigned[download.id] {  // An id twice in one batch: one row.

                    try statements.write(download, row: row, known: true)
                } else {
                    try statements.write(download, row: next, known: false)
                    assigned[download.id] = next
                    next += 1
                }
                step()
            }
            heldAfter = try operatorStatements.write(upserts: batch.upserts, deletions: batch.deletions,
                                                     tombstones: batch.tombstones)
            try statements.commit.run()
        } catch {
            try? statements.rollback.run()
            throw error
        }
        operatorStatements.committed(held: heldAfter, tombstones: batch.tombstones.count)
        duplicateRows = []
        for id in batch.deletions { rows[id] = nil }
        rows.merge(assigned) { $1 }
        self.rows = rows
        nextRow = next
    }
}
