import Dispatch

/// Start-up's read of the state store, on the state writer's thread while the start-up thread
/// restores: an earlier release's journal imported first (once), the tombstones, then the
/// downloads in batches as SQLite steps their rows, each turned into records there (`record`) and
/// handed over a few batches ahead at most (`BatchHandOff`). A row a tombstone names never becomes
/// a record: its id is handed over instead (the start-up thread removes it from the store).
final class StartupLoad: @unchecked Sendable {
    /// Rows per batch: large enough that handing over costs nothing, small enough that the
    /// start-up thread starts early.
    static let batchSize = 2048
    /// Batches read ahead of the start-up thread at most.
    static let readAhead = 4

    /// What comes before the downloads.
    struct Prologue {
        var journal: JournalImport.Outcome
        var tombstones: [Tombstone]
    }

    /// Downloads in the order they were first stored: `records` made of those no tombstone names,
    /// `buried` the ids of the others; `total`: how many the store holds in all.
    struct Batch {
        var records: [DownloadRecord] = []
        var buried: [String] = []
        var total = 0
    }

    private let batches = BatchHandOff<Batch>(capacity: readAhead)
    private let ready = DispatchSemaphore(value: 0)
    // Written once on the writer thread before `ready` is signalled; read after waiting for it.
    private var prologue: Result<Prologue, StateStoreError>?

    /// Starts reading on `writer`'s thread.
    /// `credential`: the keyed hash of a caller's headers, for the journal's credentialed URLs.
    init(writer: StateWriter, directory: String, credential: @escaping @Sendable (CallerHeaders) -> [UInt8],
         record: @escaping @Sendable (StoredDownload) -> DownloadRecord) {
        writer.start { [self] state in
            let removed: TombstoneLedger
            do throws(StateStoreError) {
                let outcome = try JournalImport.run(directory: directory, into: state, credential: credential)
                let tombstones = try state.loadTombstones()
                var ledger = TombstoneLedger()
                for tombstone in tombstones { ledger.add(tombstone) }
                removed = ledger
                prologue = .success(Prologue(journal: outcome, tombstones: tombstones))
            } catch {
                prologue = .failure(error)
                ready.signal()
                batches.finish(error)
                return
            }
            ready.signal()
            do throws(StateStoreError) {
                try state.load(batchSize: Self.batchSize) { stored, total in
                    var batch = Batch(total: total)
                    batch.records.reserveCapacity(stored.count)
                    for entry in stored {
                        if removed.count > 0 && removed[entry.id] != nil {
                            batch.buried.append(entry.id)
                        } else {
                            batch.records.append(record(entry))
                        }
                    }
                    batches.put(batch)
                }
                batches.finish()
            } catch {
                batches.finish(error)
            }
        }
    }

    /// Waits for the journal's import and the tombstones.
    func waitForPrologue() throws(StateStoreError) -> Prologue {
        ready.wait()
        return try prologue!.get()
    }

    /// The next batch, waiting for it; nil after the last. Throws what ended the read early.
    func next() throws(StateStoreError) -> Batch? {
        try batches.next()
    }
}
