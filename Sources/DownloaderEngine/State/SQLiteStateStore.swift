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

    /// What opening found: the store, and where a damaged database was kept aside.
    struct Opening {
        let store: SQLiteStateStore
        let damagedKeptAt: String?
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
    /// Crash tests: SIGKILL the process half-way through this commit (1-based; before its COMMIT).
    private let crashAtCommit: Int?
    private var commits = 0

    /// Opens `state.db` in `directory`. A damaged file is kept aside and replaced by an empty one;
    /// any other failure (a newer schema, permissions, a full disk) throws.
    static func open(directory: String, crashAtCommit: Int? = nil) throws(StateStoreError) -> Opening {
        let path = directory + "/" + fileName
        do {
            return Opening(store: try SQLiteStateStore(path: path, crashAtCommit: crashAtCommit), damagedKeptAt: nil)
        } catch where error.kind == .damaged {
            let aside: String
            do throws(SystemError) {
                aside = try FileStore.setAside(path, suffix: ".damaged")
                for companion in ["-wal", "-shm"] where access(path + companion, F_OK) == 0 {
                    try syscall("rename") { rename(path + companion, aside + companion) }
                }
            } catch {
                throw StateStoreError(kind: .other, message: "the state database \(path) is damaged (\(error)) and could not be set aside: \(error)")
            }
            return Opening(store: try SQLiteStateStore(path: path, crashAtCommit: crashAtCommit), damagedKeptAt: aside)
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

    /// Reads every download, then their tokens (both in `row` order: a merge, no lookups). The id →
    /// row map the commits need is built from what was read at the first commit, on the writer
    /// thread, not here: start-up does not wait for it.
    func load() throws(StateStoreError) -> [StoredDownload] {
        let count = Int(try statements.countDownloads())
        var downloads: [StoredDownload] = []
        var order: [Int64] = []
        downloads.reserveCapacity(count)
        order.reserveCapacity(count)
        let select = statements.selectDownloads
        defer { select.reset() }
        while try select.step() {
            order.append(select.int64(0) ?? 0)
            downloads.append(try statements.download(from: select))  // Moved in, not copied.
        }
        let tokens = statements.selectAllTokens
        defer { tokens.reset() }
        var at = 0
        while try tokens.step() {
            guard let row = tokens.int64(0), let hash = TokenHash(digest: tokens.bytes(1)) else { continue }
            while at < order.count && order[at] < row { at += 1 }
            if at < order.count && order[at] == row { downloads[at].tokens.insert(hash) }
        }
        let held = operatorStatements.held
        if !held.isEmpty {
            for i in downloads.indices where held.contains(downloads[i].id) { downloads[i].held = true }
        }
        rows = nil
        loaded = zip(downloads.lazy.map(\.id), order).map { ($0, $1) }
        return downloads
    }

    /// The id → row map: from the last `load`, or read from the table when there was none (a
    /// commit before the load).
    private func rowMap() throws(StateStoreError) -> [String: Int64] {
        if let rows { return rows }
        var found: [String: Int64] = [:]
        if let loaded {
            found.reserveCapacity(loaded.count)
            for (id, row) in loaded { found[id] = row }
        } else {
            let select = statements.selectRows
            defer { select.reset() }
            while try select.step() {
                if let row = select.int64(0), let id = select.text(1) { found[id] = row }
            }
        }
        loaded = nil
        rows = found
        nextRow = (found.values.max() ?? 0) + 1
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
            for id in batch.deletions {
                if let row = rows[id] { try statements.delete(row: row) }
                step()
            }
            for download in batch.upserts {
                if let row = rows[download.id] {
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
        for id in batch.deletions { rows[id] = nil }
        rows.merge(assigned) { $1 }
        self.rows = rows
        nextRow = next
    }
}
