import Basics
import Foundation
import Glibc

/// All shared engine state behind ONE lock, changed one way: lock, let the download's
/// `DownloadLifecycle` decide on an event and apply the data it changes (`handle`), unlock, then act
/// on what was decided (`EffectQueue`). Coalescing checks and inserts under that lock with no
/// suspension point in between. Slow work (hashing, fsync, rename) runs on `workQueue`; journal
/// writes go to their own queue; every timer goes through `scheduler`.
final class EngineCore: @unchecked Sendable {
    let configuration: EngineConfiguration
    let driver: TransferStarting
    /// Time and every timer (retries, trailing progress, the shutdown bound, journal batching).
    let scheduler: Scheduler
    var clock: EngineClock { scheduler }
    let random: RandomSource
    let store: FileStore
    let retryPolicy: RetryPolicy
    let diskPressure: DiskPressure
    let pressure: PressureMonitor
    let journalWriter: JournalWriter
    let workQueue = DispatchQueue(label: "download-engine.work", attributes: .concurrent)
    /// Purge notifications, in order, off the engine's lock.
    let notifyQueue = DispatchQueue(label: "download-engine.notify")
    let subscribers: SubscriberRegistry
    /// What decisions left to do once the lock is released.
    let effects = EffectQueue()

    let lock = NSLock()
    // Everything below is guarded by `lock`.
    var byID: [String: DownloadRecord] = [:]
    var byURL: [String: DownloadRecord] = [:]
    var tokens: [String: String] = [:]
    var slots: TransferSlots
    var stats = EngineStatistics()
    var nextSerial: UInt64 = 0
    var journalGeneration: UInt64 = 0
    /// Numbers the events decided, so a subscriber made meanwhile skips those its first element reflects.
    var eventSequence: UInt64 = 0
    var shuttingDown = false
    var shutdownWaiter: CheckedContinuation<Void, Never>?
    /// Test seams (all nil in production).
    var hooks = EngineHooks()
    /// Told about every purge (the service logs them); called on `notifyQueue`, in order.
    var purgeHandler: (@Sendable (PurgeEvent) -> Void)?
    /// Journal writes start at most this often (checkpoints, joins and progress are coalesced).
    static let journalMinInterval: Double = 0.2
    /// Unsynced bytes that trigger a checkpoint (from the configuration; tests lower it).
    var checkpointBytes: Int64

    init(configuration: EngineConfiguration, driver: TransferStarting, scheduler: Scheduler, random: RandomSource,
         diskPressure: DiskPressure, pressure: PressureMonitor) throws(SystemError) {
        self.configuration = configuration
        self.driver = driver
        self.scheduler = scheduler
        subscribers = SubscriberRegistry(scheduler: scheduler)
        self.random = random
        self.diskPressure = diskPressure
        self.pressure = pressure
        checkpointBytes = configuration.checkpointBytes
        slots = TransferSlots(capacity: configuration.maxConcurrentTransfers)
        store = try FileStore(configuration: configuration)
        retryPolicy = RetryPolicy(configuration)
        var crashAtWrite: Int?
        if let point = configuration.testCrashPoint {
            hooks = .crashing(at: point)
            if case .midJournalWrite(let n) = point { crashAtWrite = n }
        }
        journalWriter = JournalWriter(journal: StateJournal(directory: store.stateDirectory), crashAtWrite: crashAtWrite,
                                      minInterval: Self.journalMinInterval, scheduler: scheduler)
        journalWriter.source = { [weak self] in
            guard let self else { return (0, []) }
            return self.locked { (self.journalGeneration, self.byID.values.map { $0.journalEntry() }) }
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

    func makeSerial() -> UInt64 {
        nextSerial += 1
        return nextSerial
    }

    /// Under `lock`: the journaled state changed. The writer takes its snapshot under the lock when
    /// it starts writing, at most every `journalMinInterval`; it is told after the lock is released.
    func saveJournal() {
        journalGeneration += 1
        let writer = journalWriter
        effects.append { writer.markDirty() }
    }

    /// Under `lock`: `event` goes to the download's subscribers once the lock is released, in order.
    func publish(_ event: DownloadEvent, of record: DownloadRecord) {
        eventSequence += 1
        let id = record.id
        let sequence = eventSequence
        let subscribers = self.subscribers
        effects.append { subscribers.publish(event, to: id, sequence: sequence) }
    }
}
