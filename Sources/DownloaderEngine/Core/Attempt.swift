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
    /// The lifecycle's serial of this attempt (unique within its download).
    let serial: UInt64
    let recordID: String
    private weak var core: EngineCore?

    // Set by the engine under its lock.
    var handle: TransferHandle?
    /// Why the head was refused, when the engine's judgement refused it.
    var refusal: HeadJudgement.Refusal?
    /// What was asked for.
    var plan = ResumePlan.Request(offset: 0, discardsKeptBytes: false, headers: [])
    var sentValidator: Validator?
    /// Offset at which the accepted body is written (nil: no head accepted).
    var acceptedOffset: Int64?
    /// Streaming readers follow the download: every write reaches the file at once (no bytes wait
    /// in the write buffer where a reader cannot see them).
    let followed = Atomic<Bool>(false)
    /// Bytes kept before the attempt (for `restarted`).
    var keptAtStart: Int64 = 0

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
    /// A checkpoint (fdatasync of the partial on the work queue, then a journal write) every
    /// `checkpointBytes` or `checkpointSeconds` of writing (`EngineConfiguration`, default 4 MiB or
    /// 1 s): a crash loses at most that much plus what was in flight. The transfer thread only
    /// flushes the write buffer and duplicates the descriptor, so a slow disk's sync never stalls it.
    init(serial: UInt64, recordID: String, core: EngineCore, checkpointBytes: Int64, checkpointSeconds: Double) {
        self.serial = serial
        self.recordID = recordID
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
        core?.attemptEnded(self, result)
    }

    // MARK: BodySink

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let partial, let core else { throw SystemError(errno: EBADF, function: "write (no partial file)") }
        do {
            try partial.append(bytes)
            if followed.load(ordering: .relaxed) { try partial.flush() }
        } catch {
            diskError = error
            throw error
        }
        let now = core.clock.monotonic()
        let unsynced = partial.length - checkpointedLength
        if unsynced >= checkpointBytes || (unsynced > 0 && now - lastCheckpointTime >= checkpointSeconds),
           checkpointInFlight.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            do {
                // Everything up to `length` reaches the file before the descriptor is duplicated;
                // the work queue syncs through the duplicate, independent of a later close.
                try partial.flush()
                let descriptor = try partial.duplicateDescriptor()
                lastCheckpointTime = now
                checkpointedLength = partial.length
                core.checkpoint(self, descriptor: descriptor, length: partial.length)
            } catch {
                checkpointInFlight.store(false, ordering: .releasing)
                diskError = error
                throw error
            }
        }
        core.attemptWrote(self, count: Int64(bytes.count), length: partial.length, flushed: partial.flushedLength, at: now)
    }
}
