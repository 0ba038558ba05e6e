import Basics
import Foundation
import Glibc

/// All shared engine state behind ONE lock. Coalescing checks and inserts under that lock with
/// no suspension point in between. Slow work (hashing, fsync, rename) runs on `workQueue`;
/// subscribers are fed without blocking; journal writes go to their own queue.
final class EngineCore: @unchecked Sendable {
    let configuration: EngineConfiguration
    let driver: TransferStarting
    let clock: EngineClock
    let random: RandomSource
    let store: FileStore
    let retryPolicy: RetryPolicy
    let diskPressure: DiskPressure
    let pressure: PressureMonitor
    let journalWriter: JournalWriter
    let workQueue = DispatchQueue(label: "download-engine.work", attributes: .concurrent)
    let timerQueue = DispatchQueue(label: "download-engine.timers")
    let subscribers = SubscriberRegistry()

    let lock = NSLock()
    // Everything below is guarded by `lock`.
    var byID: [String: DownloadRecord] = [:]
    var byURL: [String: DownloadRecord] = [:]
    var tokens: [String: String] = [:]
    var waiting: [String] = []
    var activeSlots = 0
    var stats = EngineStatistics()
    var nextSerial: UInt64 = 0
    var journalGeneration: UInt64 = 0
    var shuttingDown = false
    var shutdownWaiter: CheckedContinuation<Void, Never>?
    /// Test seams (all nil in production).
    var hooks = EngineHooks()
    /// Told about every purge (the service logs them); called on `timerQueue`, in order.
    var purgeHandler: (@Sendable (PurgeEvent) -> Void)?
    /// Journal writes start at most this often (checkpoints, joins and progress are coalesced).
    static let journalMinInterval: Double = 0.2
    /// Unsynced bytes that trigger a checkpoint (from the configuration; tests lower it).
    var checkpointBytes: Int64

    init(configuration: EngineConfiguration, driver: TransferStarting, clock: EngineClock, random: RandomSource,
         diskPressure: DiskPressure, pressure: PressureMonitor) throws(SystemError) {
        self.configuration = configuration
        self.driver = driver
        self.clock = clock
        self.random = random
        self.diskPressure = diskPressure
        self.pressure = pressure
        checkpointBytes = configuration.checkpointBytes
        store = try FileStore(configuration: configuration)
        retryPolicy = RetryPolicy(configuration)
        var crashAtWrite: Int?
        if let point = configuration.testCrashPoint {
            hooks = .crashing(at: point)
            if case .midJournalWrite(let n) = point { crashAtWrite = n }
        }
        journalWriter = JournalWriter(journal: StateJournal(directory: store.stateDirectory), crashAtWrite: crashAtWrite,
                                      minInterval: Self.journalMinInterval)
        journalWriter.source = { [weak self] in
            guard let self else { return (0, []) }
            return self.locked { (self.journalGeneration, self.byID.values.map { $0.journalEntry() }) }
        }
    }

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    func makeSerial() -> UInt64 {
        nextSerial += 1
        return nextSerial
    }

    // MARK: Requests

    func request(_ request: DownloadRequest) throws(EngineError) -> Enqueued {
        let url = try URLNormalizer.normalize(request.url, allowCredentials: configuration.allowURLCredentials).get()
        var sha: String?
        if let given = request.sha256 {
            guard let normalized = ChecksumFormat.normalizedSHA256(given) else {
                throw .invalidChecksum("sha256 must be 64 hex digits")
            }
            sha = normalized
        }
        if let size = request.size, size < 0 { throw .invalidURL("size must not be negative") }
        let token = random.hex(byteCount: 16)
        // A stored file's stat runs before the lock is taken: a slow disk never holds the engine.
        // (Checked again below that the path is still the one stat'ed.)
        let storedPath: String? = locked { byURL[url].flatMap { $0.state == .completed ? $0.finalPath : nil } }
        let storedFileVanished = storedPath.map { FileStore.fileSize($0) == nil } ?? false
        lock.lock()
        defer { lock.unlock() }
        guard !shuttingDown else { throw .shuttingDown() }
        let now = clock.now()
        guard let record = byURL[url] else {
            var id = random.hex(byteCount: 8)
            while byID[id] != nil { id = random.hex(byteCount: 8) }
            let record = DownloadRecord(id: id, url: url, storage: request.storage, state: .queued, now: now,
                                        tau: configuration.rateTimeConstant)
            record.expectedSHA256 = sha
            record.expectedSize = request.size
            byID[id] = record
            byURL[url] = record
            addToken(token, to: record)
            schedule(record)
            saveJournal()
            return Enqueued(token: token, snapshot: record.snapshot(), coalesced: false)
        }
        if record.tokens.count >= max(1, configuration.maxCallersPerDownload) {
            // Tokens of an ended download hold nothing (no transfer to keep alive): make room by
            // dropping one. A running download's callers are real: refuse the newcomer.
            guard record.state == .completed || record.state == .failed else {
                throw .tooManyCallers("the download already has \(record.tokens.count) callers")
            }
            if let dropped = record.tokens.popFirst() { tokens[dropped] = nil }
        }
        try checkExpectations(record, sha: sha, size: request.size)
        if record.state == .completed, storedFileVanished, record.finalPath == storedPath {
            resetForRedownload(record)
        }
        if request.storage == .persistent && record.storage == .cache { promoteToPersistent(record) }
        record.updatedAt = now
        var coalesced = true
        switch record.state {
        case .completed:
            record.lastAccess = now
            stats.coalescedJoins += 1
        case .queued, .downloading:
            stats.coalescedJoins += 1
        case .paused, .failed:
            coalesced = false
            record.error = nil
            schedule(record)
        }
        if record.systemHold { record.systemHold = false }
        addToken(token, to: record)
        saveJournal()  // Tokens are journaled: they keep working after a restart.
        return Enqueued(token: token, snapshot: record.snapshot(), coalesced: coalesced)
    }

    private func addToken(_ token: String, to record: DownloadRecord) {
        tokens[token] = record.id
        record.tokens.insert(token)
    }

    private func checkExpectations(_ record: DownloadRecord, sha: String?, size: Int64?) throws(EngineError) {
        if record.state == .failed {
            // A failed download starts afresh: the restarting request's expectations apply.
            record.expectedSHA256 = sha
            record.expectedSize = size
            return
        }
        if let sha {
            if let known = record.expectedSHA256 ?? (record.state == .completed ? record.sha256 : nil), known != sha {
                throw .conflict("sha256 differs from the existing download's")
            }
        }
        if let size {
            if let known = record.expectedSize ?? (record.state == .completed ? record.size : nil), known != size {
                throw .conflict("size differs from the existing download's")
            }
        }
        if record.state != .completed {
            if record.expectedSHA256 == nil { record.expectedSHA256 = sha }
            if record.expectedSize == nil { record.expectedSize = size }
        }
    }

    /// A completed download whose file vanished starts over under the same id.
    private func resetForRedownload(_ record: DownloadRecord) {
        record.state = .failed
        record.finalPath = nil
        record.sha256 = nil
        record.size = nil
        record.keptBytes = 0
        record.durableOffset = 0
        record.keptHasher = nil
        record.bytesWritten = 0
        record.validator = nil
        record.expectedTotal = nil
    }

    /// `persistent` wins over `cache`; a completed cache file moves into the data area on the work
    /// queue (served from where it is until then).
    private func promoteToPersistent(_ record: DownloadRecord) {
        record.storage = .persistent
        scheduleMove(record)
    }

    /// Deletes `path` on the work queue (the name must not be reused before then).
    func removeLater(_ path: String) {
        let before = hooks.beforeRemove
        workQueue.async {
            before?()
            FileStore.remove(path)
        }
    }

    // MARK: Cancel

    func cancel(token: String) -> DownloadSnapshot? {
        var cancels: [TransferHandle] = []
        defer { cancels.forEach { $0.cancel() } }
        lock.lock()
        defer { lock.unlock() }
        guard let id = tokens.removeValue(forKey: token), let record = byID[id] else { return nil }
        record.tokens.remove(token)
        record.updatedAt = clock.now()
        if record.tokens.isEmpty, !record.systemHold, record.state == .queued || record.state == .downloading {
            if let handle = pause(record) { cancels.append(handle) }
            boundEmptyPaused()
        }
        saveJournal()
        return record.snapshot()
    }

    /// Stops work on `record` and keeps its partial; returns a transfer handle to cancel after unlocking.
    func pause(_ record: DownloadRecord) -> TransferHandle? {
        var handle: TransferHandle?
        if let index = waiting.firstIndex(of: record.id) { waiting.remove(at: index) }
        record.retryTimer?.cancel()
        record.retryTimer = nil
        record.startAfterDrain = false
        if let attempt = record.attempt {
            attempt.abandoned = true
            handle = attempt.handle
        }
        releaseSlot(record)
        record.state = .paused
        record.attemptsMade = 0
        // `.paused` is published once the partial is settled (flushed, or dropped when not
        // resumable): at once without a running attempt, else when the cancelled attempt ends.
        if record.attempt == nil {
            settlePausedPartial(record)
            emit(record, .paused(record.snapshot()))
        }
        return handle
    }

    /// Without a usable validator the kept bytes cannot be resumed safely: drop them.
    func settlePausedPartial(_ record: DownloadRecord) {
        guard record.validator == nil, record.keptBytes > 0 else { return }
        discardPartial(record)
    }

    /// Drops the kept bytes. The partial's name is freed at once (renamed aside: the same download
    /// reuses it) and the file deleted on the work queue, so callers under the lock never wait for
    /// the file system to free a large file's blocks.
    func discardPartial(_ record: DownloadRecord) {
        let path = store.partialPath(id: record.id)
        let aside = path + ".\(makeSerial())" + FileStore.trashSuffix
        if rename(path, aside) == 0 {
            removeLater(aside)
        } else if errno != ENOENT {
            FileStore.remove(path)
        }
        record.keptBytes = 0
        record.durableOffset = 0
        record.keptHasher = nil
        record.bytesWritten = 0
    }
}
