import Basics
import Foundation
import Glibc

/// All shared engine state behind ONE lock, changed one way: lock, let the download's
/// `DownloadLifecycle` decide on an event and apply the data it changes (`handle`), unlock, then act
/// on what was decided (`EffectQueue`). Coalescing checks and inserts under that lock with no
/// suspension point in between. Slow work (hashing, fsync, rename) runs on `workQueue`; state
/// commits go to their own thread (`StateWriter`); every timer goes through `scheduler`.
final class EngineCore: @unchecked Sendable {
    let configuration: EngineConfiguration
    let driver: TransferStarting
    /// Time and every timer (retries, trailing progress, the shutdown bound, state commit batching).
    let scheduler: Scheduler
    var clock: EngineClock { scheduler }
    /// What ages are measured against before a purge (`AgeingClock`): anchored at the engine's start.
    let ageing: AgeingClock
    let random: RandomSource
    let store: FileStore
    let retryPolicy: RetryPolicy
    /// Looks at the free space before a full disk fails a download (`SpaceWait.checks`).
    let maxSpaceWaits: Int
    let diskPressure: DiskPressure
    let pressure: PressureMonitor
    /// Bytes of decided deletions not done yet: a pressure check counts them as free.
    let freeing = FreeingBytes()
    let stateWriter: StateWriter
    /// Where opening the state store found a damaged database and kept it aside, and why; and every
    /// damaged database kept in the state area (no file is swept while one is: it may be salvaged).
    let stateDamage: (keptAt: String?, reason: String?, kept: [String])
    let workQueue = DispatchQueue(label: "download-engine.work", attributes: .concurrent)
    /// Purge notifications, in order, off the engine's lock.
    let notifyQueue = DispatchQueue(label: "download-engine.notify")
    /// Where streaming readers' watchers are told that their download's bytes or phase changed
    /// (`DownloadTail`): off the threads that change them (the partial's write lane among them).
    let tailTeller = DispatchQueue(label: "download-engine.readers")
    let subscribers: SubscriberRegistry
    /// Every download's events in one stream (`GET /events`).
    let feed: EventFeed
    /// What decisions left to do once the lock is released.
    let effects = EffectQueue()
    /// The key of the credential hash in coalescing keys (`CredentialKey`).
    let credentialKey: CredentialKey
    /// Cluster mode's leases and the downloads they cover (nil in a single process).
    let cluster: EngineCluster?

    let lock = NSLock()
    // Everything below is guarded by `lock`.
    var byID: [String: DownloadRecord] = [:]
    /// By coalescing key: normalised URL (ignored query parameters left out) and credential hash.
    var byURL: [CoalescingKey: DownloadRecord] = [:]
    /// Keys several downloads came to share (`coalesceIgnoreQuery` turned on over stored ones): when
    /// the one `byURL` names goes, another takes its place (`unindex`).
    var sharedKeys: Set<CoalescingKey> = []
    /// Callers' token hashes → download id.
    var tokens: [TokenHash: String] = [:]
    var slots: TransferSlots
    var stats = EngineStatistics()
    var nextSerial: UInt64 = 0
    /// The failed downloads, by id (bounding them must not scan every download at each failure).
    var failedRecords: [String: DownloadRecord] = [:]
    /// Completed downloads by their file's SHA-256 (`reusable`, `indexCompleted`).
    var completedBySHA256: [String: Set<String>] = [:]
    /// Paused downloads that keep no bytes, as the last bound of them saw (`boundEmptyPaused`): what
    /// a pause's bound looks at besides the pausing download, between passes over every download.
    var emptyPausedSeen: Set<String> = []
    /// Downloads changed (or forgotten) since the state writer last took a batch.
    var unsaved: Set<String> = []
    /// Numbers the events decided, so a subscriber made meanwhile skips those its first element reflects.
    var eventSequence: UInt64 = 0
    var shuttingDown = false
    /// Removed downloads (newest `Tombstone.limit`), written with their rows' deletion (`takeUnsaved`).
    var tombstones = TombstoneLedger()
    var shutdownWaiter: CheckedContinuation<Void, Never>?
    /// Test seams (all nil in production).
    var hooks = EngineHooks()
    /// Told about every purge (the service logs them); called on `notifyQueue`, in order.
    var purgeHandler: (@Sendable (PurgeEvent) -> Void)?
    /// State commits start at most this often (checkpoints, joins and progress are coalesced).
    static let stateMinInterval: Double = 0.2
    /// Unsynced bytes that trigger a checkpoint (from the configuration; tests lower it).
    var checkpointBytes: Int64
    /// Times the fetches' hashing and their waits for a buffer, when `EngineConfiguration.onCPUWait` listens.
    let cpuWaitMeter: CPUWaitMeter?

    init(configuration: EngineConfiguration, driver: TransferStarting, scheduler: Scheduler, random: RandomSource,
         diskPressure: DiskPressure, pressure: PressureMonitor) throws {
        self.configuration = configuration
        self.driver = driver
        self.scheduler = scheduler
        ageing = AgeingClock(scheduler)
        subscribers = SubscriberRegistry(scheduler: scheduler)
        self.random = random
        self.diskPressure = diskPressure
        self.pressure = pressure
        checkpointBytes = configuration.checkpointBytes
        cpuWaitMeter = configuration.onCPUWait.map { CPUWaitMeter(onWaiting: $0) }
        slots = TransferSlots(capacity: configuration.maxConcurrentTransfers)
        store = try FileStore(configuration: configuration)
        credentialKey = try CredentialKey.loadOrCreate(directory: store.stateDirectory, random: random)
        retryPolicy = RetryPolicy(configuration)
        maxSpaceWaits = SpaceWait.checks(waiting: configuration.diskFullWait, maxDelay: retryPolicy.maxDelay)
        var crashAtCommit: Int?
        if let point = configuration.testCrashPoint {
            hooks = .crashing(at: point)
            if case .midStateCommit(let n) = point { crashAtCommit = n }
        }
        let stateStore: StateStore
        if let cluster = configuration.clusterDatabase {
            stateStore = cluster.store
            stateDamage = (nil, nil, [])
        } else {
            let opening = try SQLiteStateStore.open(directory: store.stateDirectory, crashAtCommit: crashAtCommit)
            stateDamage = (opening.damagedKeptAt, opening.damage, opening.damagedKept)
            stateStore = opening.store
        }
        cluster = configuration.clusterDatabase.map { [scheduler] in
            EngineCluster(database: $0, replica: configuration.clusterReplica, monotonic: { scheduler.monotonic() })
        }
        stateWriter = StateWriter(store: stateStore, minInterval: Self.stateMinInterval, scheduler: scheduler)
        feed = Self.makeFeed(pacer: subscribers.pacer, stateWriter: stateWriter, snapshotBudget: configuration.eventSnapshotBudget,
                             background: workQueue)
        stateWriter.source = { [weak self] retry in
            guard let self else { return StateBatch() }
            return self.locked { self.takeUnsaved(adding: retry) }
        }
    }

    /// Reads (or changes what no decision depends on) under the lock.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Locks, runs `body` (which decides: `handle`, data changes, effects queued), unlocks, then
    /// carries out the effects.
    func decide<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock.lock()
        let result: Result<T, E>
        do throws(E) {
            result = .success(try body())
        } catch {
            result = .failure(error)
        }
        lock.unlock()
        effects.drain()
        return try result.get()
    }

    /// Under `lock`: the download `attempt` is of, while the record that started it is the one
    /// held (nil once removed or evicted, also when the download was adopted again meanwhile: the
    /// new record's serials start afresh, so a serial alone would take the old attempt for its own).
    func record(of attempt: Attempt) -> DownloadRecord? {
        guard let record = byID[attempt.recordID], record.incarnation == attempt.recordIncarnation else { return nil }
        return record
    }

    func makeSerial() -> UInt64 {
        nextSerial += 1
        return nextSerial
    }

    /// Under `lock`: `record` changed (or was forgotten). The writer takes a batch of what changed
    /// under the lock when it starts a commit, at most every `stateMinInterval`; it is told after the
    /// lock is released.
    func save(_ record: DownloadRecord) {
        unsaved.insert(record.id)
        let writer = stateWriter
        effects.append { writer.markDirty() }
    }

    /// Under `lock`: the batch for the state writer, of the downloads changed since the last one and
    /// `retry` (a failed batch's): those still known are written whole, the others removed.
    func takeUnsaved(adding retry: Set<String>) -> StateBatch {
        var batch = StateBatch()
        for id in unsaved.union(retry) {
            if let record = byID[id] {
                if let row = batchRow(of: record) { batch.upserts.append(row) }
            } else if deletesRow(of: id) {
                batch.deletions.append(id)
                if let fence = cluster?.forgotten[id] ?? nil { batch.deletionFences[id] = fence }
                if let tombstone = tombstones[id] { batch.tombstones.append(tombstone) }
            }
        }
        unsaved.removeAll(keepingCapacity: true)
        return batch
    }

    /// Under `lock`: `event` goes to the download's subscribers once the lock is released, in order.
    func publish(_ event: DownloadEvent, of record: DownloadRecord) {
        eventSequence += 1
        let id = record.id
        let sequence = eventSequence
        let (subscribers, feed) = (self.subscribers, self.feed)
        effects.append {
            subscribers.publish(event, to: id, sequence: sequence)
            feed.ingest(event)
        }
        // A removal ends streams too, but it is no completion or failure (webhooks are about those):
        // the download's callbacks go, with any delivery still pending.
        if case .removed = event {
            if let removed = hooks.removed { effects.append { removed(id) } }
            return
        }
        if event.isTerminal, let ended = hooks.ended { effects.append { ended(event.snapshot) } }
    }
}
