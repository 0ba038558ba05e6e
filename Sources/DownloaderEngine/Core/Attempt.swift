import Foundation
import Glibc

/// One attempt at fetching a download: the transfer's delegate and body sink. Its partial file is
/// used by one thread at a time (work queue to prepare, transfer thread while running, work queue
/// again to settle), handed over by the transfer's own ordering.
final class Attempt: TransferDelegate, BodySink, @unchecked Sendable {
    /// Why the engine ended the attempt from `didReceive(head:)`.
    enum Outcome {
        /// Unusable partial answer: discard kept bytes, try again from 0.
        case restart(String)
        case httpRetry(status: Int, retryAfter: String?)
        case httpFail(status: Int)
        case fail(DownloadFailure, discard: Bool)
    }

    let serial: UInt64
    let recordID: String
    private weak var core: EngineCore?

    // Set by the engine under its lock.
    var handle: TransferHandle?
    /// The last caller left (or the engine is shutting down): settle instead of retrying.
    var abandoned = false
    var outcome: Outcome?
    var headAccepted = false
    /// What was asked for.
    var plan = ResumePlan.Request(offset: 0, discardsKeptBytes: false, headers: [])
    var sentValidator: Validator?
    /// Offset at which the accepted body is written.
    var acceptedOffset: Int64 = 0
    /// Bytes kept before the attempt (for `restarted`).
    var keptAtStart: Int64 = 0

    // Owned by whichever thread currently runs the attempt.
    var partial: PartialFile?
    var diskError: SystemError?
    private var lastSyncTime: Double = 0
    /// A checkpoint (fdatasync of the partial, then a journal write) every 32 MiB or 2 s of writing:
    /// a crash loses at most that much; fewer syncs keep the shared transfer thread moving.
    static let checkpointBytes: Int64 = 32 << 20
    static let checkpointSeconds: Double = 2

    init(serial: UInt64, recordID: String, core: EngineCore) {
        self.serial = serial
        self.recordID = recordID
        self.core = core
    }

    // MARK: TransferDelegate

    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
        guard let core else { return .failure(TransferFailure(.rejected, "engine gone")) }
        if let failure = core.attemptReceivedHead(self, head) { return .failure(failure) }
        lastSyncTime = core.clock.monotonic()
        return .success(self)
    }

    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
        guard let core else { return }
        core.workQueue.async { core.attemptFinished(self, result) }
    }

    // MARK: BodySink

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let partial, let core else { throw SystemError(errno: EBADF, function: "write (no partial file)") }
        do {
            try partial.append(bytes)
        } catch {
            diskError = error
            throw error
        }
        let now = core.clock.monotonic()
        var durable: Int64?
        if partial.length - partial.durableLength >= Self.checkpointBytes
            || (now - lastSyncTime >= Self.checkpointSeconds && partial.length > partial.durableLength) {
            lastSyncTime = now
            do {
                try partial.sync()
                durable = partial.durableLength
            } catch {
                diskError = error
                throw error
            }
        }
        core.attemptWrote(self, count: Int64(bytes.count), length: partial.length, durable: durable, at: now)
    }
}
