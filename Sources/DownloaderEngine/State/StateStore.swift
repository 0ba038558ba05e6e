/// Where the engine's state survives restarts. The engine speaks only this interface: which
/// database is behind it (SQLite today, `SQLiteStateStore`) is known where the store is opened and
/// nowhere else. Used from one thread at a time (the engine's `StateWriter`).
protocol StateStore: AnyObject, Sendable {
    /// Every download recorded, in the order they were first recorded.
    func load() throws(StateStoreError) -> [StoredDownload]

    /// The same downloads, in the same order, handed to `body` in batches of at most `batchSize`
    /// as they are read (start-up turns one batch into records while the next is read), with
    /// how many there are in all (for reserving).
    func load(batchSize: Int, _ body: (_ batch: [StoredDownload], _ total: Int) -> Void) throws(StateStoreError)

    /// Applies `batch` atomically and durably: once it returns, all of it survives a crash or a
    /// power loss; when it throws, none of it was applied.
    func commit(_ batch: StateBatch) throws(StateStoreError)

    /// Folds whatever the store keeps beside its file into it (a clean stop leaves one
    /// self-contained file). Later commits still work.
    func checkpoint() throws(StateStoreError)

    /// The tombstones of removed downloads (see `Tombstone`), oldest first.
    func loadTombstones() throws(StateStoreError) -> [Tombstone]
}

extension StateStore {
    /// A store that keeps no tombstones has none to give.
    func loadTombstones() throws(StateStoreError) -> [Tombstone] { [] }

    /// A store that cannot stream reads everything first, then hands it out in batches.
    func load(batchSize: Int, _ body: (_ batch: [StoredDownload], _ total: Int) -> Void) throws(StateStoreError) {
        let all = try load()
        let size = max(1, batchSize)
        for start in stride(from: 0, to: all.count, by: size) {
            body(Array(all[start..<min(all.count, start + size)]), all.count)
        }
    }
}

/// Changes committed together: downloads written whole (inserted or replaced, tokens included)
/// and downloads removed (with their tokens); `tombstones` of removed downloads are written with them.
struct StateBatch: Sendable, Equatable {
    var upserts: [StoredDownload] = []
    var deletions: [String] = []
    /// Cluster mode: the lease a deletion was decided under (the row goes only while its epoch
    /// holds the lease; the single process has none).
    var deletionFences: [String: LeaseFence] = [:]
    var tombstones: [Tombstone] = []

    var isEmpty: Bool { upserts.isEmpty && deletions.isEmpty && tombstones.isEmpty }

    /// The ids the batch touches.
    var ids: Set<String> { Set(upserts.map(\.id)).union(deletions) }
}

/// A state store's failure: the database's own result code and message, and what was being done.
struct StateStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        /// The file is not a database or is damaged.
        case damaged
        /// The file was written by a newer build (its schema version is beyond this build's).
        case newerSchema
        /// The disk or the quota is full.
        case full
        case other
    }

    var kind: Kind
    var message: String

    var description: String { message }
}
