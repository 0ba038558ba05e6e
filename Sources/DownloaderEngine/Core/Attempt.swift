import Basics
import Foundation
import Glibc
import Synchronization

/// One attempt at fetching a download: the transfer's delegate and body sink, and the data of the
/// attempt (what it asked for, what it accepted, why it was refused). Its place in the download's
/// life (starting, transferring, settling; abandoned or not) is `DownloadLifecycle.attempt`'s, by
/// `serial`. Its partial file is used by one thread at a time (work queue to prepare, transfer
/// thread while running, work queue again to settle), handed over by the transfer's own ordering.
final class Attempt: TransferDelegate, BodySink, @unchecked Sendable {
    /// The lifecycle's serial of this attempt (unique within its download's record).
    let serial: UInt64
    let recordID: String
    /// The record that started it (`DownloadRecord.incarnation`): a later record of the same
    /// download (cluster mode: evicted, then adopted again) counts its serials afresh, so an
    /// attempt is its record's only while that record is the one the engine holds
    /// (`EngineCore.record(of:)`).
    let recordIncarnation: UInt64
    private(set) weak var core: EngineCore?

    // Set by the engine under its lock.
    var handle: TransferHandle?
    /// A checkpoint's sync failed: written bytes past `durable` (the offset stored before it) may be
    /// lost, and no later sync of the same open file says so again (Linux reports a failed writeback
    /// once). Nothing is published and no offset advances after it.
    var lostSync: (error: SystemError, durable: Int64)?
    /// Why the head was refused, when the engine's judgement refused it.
    var refusal: HeadJudgement.Refusal?
    /// What was asked for.
    var plan = ResumePlan.Request(offset: 0, discardsKeptBytes: false, headers: [])
    var sentValidator: Validator?
    /// Cluster mode: the lease the download is held under; no byte is written once it may not write.
    var lease: LeaseHold?
    /// Offset at which the accepted body is written (nil: no head accepted).
    var acceptedOffset: Int64?
    /// A `206`'s end: one past the last byte its Content-Range names. A body that runs past it
    /// (chunked, so no Content-Length stops it first) fails as one longer than its Content-Length.
    var rangeEnd: Int64?
    /// Streaming readers follow the download: appends are handed to the partial's write lane soon
    /// (no bytes wait for a full buffer where a reader cannot see them), paced by `handOverPacing`;
    /// the transfer thread never waits for the write. Readers are told what is in the file by the
    /// write lane.
    let followed = Atomic<Bool>(false)
    let handOverPacing = HandOverPacing()
    /// Transfer thread: when the oldest byte held back from the readers was appended (nil: none held),
    /// and whether this attempt handed any over yet (`Attempt+HandOver`).
    var heldSince: Double?
    var handedOverAny = false
    /// Transfer thread: the accepted answer carries no byte of the file (a 416 confirming that the
    /// kept bytes are all of it): its body is dropped.
    var discardsBody = false
    /// Bytes kept before the attempt (for `restarted`): the contiguous prefix, and with the
    /// pieces beyond it (`DownloadRecord.partialBytes`, for `AttemptEnd.progressed`).
    var keptAtStart: Int64 = 0
    var heldAtStart: Int64 = 0
    /// The attempt before this one had to drop its kept bytes (`DownloadRecord.restartPending`).
    var followsRestart = false

    /// A body accepted at `offset` replaces bytes the download held: a restart, to be told as one.
    func restarts(at offset: Int64) -> Bool { offset == 0 && (keptAtStart > 0 || followsRestart) }
    /// The request as launched (segment fetches copy it) and its transfer.
    var launched: TransferRequest?
    private let mainTransfer = Mutex<(handle: TransferHandle?, ended: Bool)>((nil, false))
    /// Segmented fetch: the planned segments (under the engine's lock, from the accepted head), then
    /// the crew running them (from the transfer thread); `prefixEnd` is where this transfer stops.
    var segmentPlan: [Segment]?
    var segmentConnections = 1
    /// The partial keeps a segmented download's bytes after its prefix (a full answer replaces it,
    /// unless `continuesTail`).
    var keptSegments = false
    /// With `keptSegments` while the prefix kept nothing (the request asks from 0, no `Range`):
    /// the version and size the pieces belong to. A `200` of that version and size goes on with
    /// them (`continuesTail`) instead of starting over.
    var keptTailOf: (validator: Validator, total: Int64)?
    var continuesTail = false
    /// Transfer thread: a whole answer to a resume, of the kept version (an origin that ignores
    /// `Range`): its first bytes are the kept ones, checked and dropped before the rest is appended.
    var keptSkip: KeptBytesSkip?
    private let crewBox = Mutex<SegmentCrew?>(nil)
    private(set) var prefixEnd: Int64?
    private var reachedPrefixEnd = false
    private let mainStopped = Atomic<Bool>(false)

    // Owned by whichever thread currently runs the attempt.
    var partial: PartialFile?
    var diskError: SystemError?
    private var lastCheckpointTime: Double = 0
    /// Length handed to the last checkpoint.
    private var checkpointedLength: Int64 = 0
    private let checkpointBytes: Int64
    private let checkpointSeconds: Double
    /// A checkpoint's fdatasync is running on the work queue (at most one per attempt; while it
    /// runs, due checkpoints are merged into the next one instead of piling up).
    let checkpointInFlight = Atomic<Bool>(false)
    /// A checkpoint (fdatasync of the partial on the work queue, then a state write) every
    /// `checkpointBytes` or `checkpointSeconds` of writing (`EngineConfiguration`, default 4 MiB or
    /// 1 s): a crash loses at most that much plus what was in flight. The transfer thread only hands
    /// the buffered bytes over; once they are written, the partial file's write lane opens the
    /// file again for the sync, so neither a write nor a slow disk's sync stalls the transfer.
    init(serial: UInt64, record: DownloadRecord, core: EngineCore, checkpointBytes: Int64, checkpointSeconds: Double) {
        self.serial = serial
        recordID = record.id
        recordIncarnation = record.incarnation
        self.core = core
        self.checkpointBytes = max(1, checkpointBytes)
        self.checkpointSeconds = max(0, checkpointSeconds)
    }

    // MARK: TransferDelegate

    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
        guard let core else { return .failure(TransferFailure(.rejected, "engine gone")) }
        if let failure = core.attemptReceivedHead(self, head) { return .failure(failure) }
        lastCheckpointTime = core.clock.monotonic()
        checkpointedLength = partial?.length ?? 0
        return .success(self)
    }

    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
        mainTransfer.withLock { $0 = (nil, true) }
        if let crew {
            crew.mainEnded(result, atBoundary: reachedPrefixEnd, partial: partial)
        } else {
            core?.attemptEnded(self, result)
        }
    }

    // MARK: Segments

    var crew: SegmentCrew? { crewBox.withLock { $0 } }

    /// The transfer as started (so that a crew can stop it).
    func started(_ handle: TransferHandle) {
        // Ended already (it failed at once): not kept, or the handle, which holds this attempt as its
        // delegate, and this attempt would keep each other alive.
        let kept = mainTransfer.withLock { state -> Bool in
            if !state.ended { state.handle = handle }
            return !state.ended
        }
        // Stopped before its handle was known (its head came first, and a piece abandoned the crew
        // at once): stopped now, not left running until its next write, or its stall timeout.
        if kept && mainStopped.load(ordering: .acquiring) { handle.cancel() }
    }

    /// Transfer thread, from the head callback: the crew takes over the segments after the prefix.
    func adopt(_ crew: SegmentCrew) {
        prefixEnd = crew.prefixEnd
        crewBox.withLock { $0 = crew }
    }

    /// Stops this attempt's own transfer (the crew abandons or stops).
    func stopMain() {
        mainStopped.store(true, ordering: .releasing)
        mainTransfer.withLock { $0.handle }?.cancel()
    }

    /// Every connection of the crew ended.
    func crewFinished(_ result: Result<TransferSummary, TransferFailure>) {
        core?.attemptEnded(self, result)
    }

    // MARK: BodySink

    func write(_ received: UnsafeRawBufferPointer) throws {
        if discardsBody { return }
        guard let partial, let core else { throw SystemError(errno: EBADF, function: "write (no partial file)") }
        try core.checkWrite(under: lease)
        guard let whole = try skipKeptBytes(received, partial, core) else { return }
        if let limit = core.configuration.maxFileSize, partial.length + Int64(whole.count) > limit {
            throw TransferFailure(.tooLarge, "the file exceeds \(limit) bytes")
        }
        if let rangeEnd, partial.length + Int64(whole.count) > rangeEnd {
            throw TransferFailure(.contentLengthMismatch, "the origin sent more than the \(rangeEnd - (acceptedOffset ?? 0)) bytes its Content-Range announced")
        }
        var bytes = whole
        var atPrefixEnd = false
        if var end = prefixEnd {
            if mainStopped.load(ordering: .acquiring) { throw SegmentStop() }
            // At its end the prefix runs on into the next piece when nobody has it.
            while Int64(bytes.count) >= end - partial.length, let further = crew?.extendPrefix() { end = further }
            prefixEnd = end
            let room = Int(max(0, end - partial.length))
            if bytes.count >= room {
                bytes = UnsafeRawBufferPointer(rebasing: whole[..<room])
                atPrefixEnd = true
            }
        }
        do {
            try partial.append(bytes)
        } catch {
            diskError = error
            throw error
        }
        let now = core.clock.monotonic()
        if followed.load(ordering: .relaxed) { handOverIfDue(partial, at: now) }
        let unsynced = partial.length - checkpointedLength
        // At its piece's end the prefix writes no more: its last bytes are checkpointed now (beside
        // one in flight, if any), not left unsynced in its buffer until the attempt settles.
        let last = atPrefixEnd && unsynced > 0
        if last || unsynced >= checkpointBytes || (unsynced > 0 && now - lastCheckpointTime >= checkpointSeconds),
           checkpointInFlight.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged || last {
            lastCheckpointTime = now
            checkpointedLength = partial.length
            // Everything up to `length` reaches the file before the second descriptor is opened;
            // the work queue syncs through it, independent of a later close.
            partial.whenWritten { [self] descriptor, length in
                if let descriptor {
                    core.checkpoint(self, descriptor: descriptor, length: length)
                } else {
                    checkpointInFlight.store(false, ordering: .releasing)  // A write failed: the next append throws it.
                }
            }
        }
        let length = prefixEnd == nil ? partial.length : crew?.mainWrote(length: partial.length, at: now) ?? partial.length
        core.attemptWrote(self, count: Int64(bytes.count), length: length, at: now)
        if atPrefixEnd {
            reachedPrefixEnd = true
            throw SegmentStop()
        }
    }
}

extension Attempt {
    /// `received` less what it repeats of the kept bytes (`keptSkip`); nil when nothing is left.
    /// The repeated bytes count as received. Kept bytes that differ from the answer's end the
    /// attempt as a restart: the file changed under the same tag.
    fileprivate func skipKeptBytes(_ received: UnsafeRawBufferPointer, _ partial: PartialFile,
                                   _ core: EngineCore) throws -> UnsafeRawBufferPointer? {
        guard let skip = keptSkip else { return received }
        let (taken, step) = skip.take(received)
        if step != .skipping { keptSkip = nil }
        core.attemptWrote(self, count: Int64(taken), length: partial.length, at: core.clock.monotonic(), repeating: skip.remaining)
        if step == .differs {
            let reason = "the origin's whole answer under the kept ETag holds other bytes than those kept"
            refusal = .restart(reason)
            throw TransferFailure(.rejected, reason)
        }
        return taken == received.count ? nil : UnsafeRawBufferPointer(rebasing: received[taken...])
    }
}

/// What the engine cancels an attempt by: its own transfer and, when segmented, every fetch.
final class AttemptHandle: TransferHandle, @unchecked Sendable {
    private let main: TransferHandle
    private weak var attempt: Attempt?

    init(main: TransferHandle, attempt: Attempt) {
        self.main = main
        self.attempt = attempt
    }

    func cancel() {
        main.cancel()
        attempt?.crew?.cancel()
    }
}

/// Stops a segmented attempt's own transfer at the end of its prefix (or when the crew stops).
struct SegmentStop: Error {}
