import Basics
import Glibc

/// What happens to a download, as `DownloadLifecycle` hears it. Attempts are named by their serial,
/// so an event about an attempt that is no longer the current one is recognised as stale.
enum LifecycleEvent: Equatable, Sendable {
    /// A caller asked for the download (`POST /downloads`).
    case callerJoined
    /// A caller withdrew its token; `remaining` callers are left. `partial`: what the download keeps now.
    case callerLeft(remaining: Int, partial: PartialFacts)
    /// The engine's transfer slots (`TransferSlots`) handed the download one.
    case slotGranted
    /// The attempt's response head arrived; `accepts`: the engine's judgement of it (`HeadJudgement`)
    /// would write its body.
    case headReceived(serial: UInt64, accepts: Bool)
    /// A checkpoint of the attempt's partial reached the disk (fdatasync done): bytes settled.
    case checkpointSynced(serial: UInt64)
    /// The attempt's transfer ended (any way); its result is to be settled.
    case transferEnded(serial: UInt64)
    /// The attempt's file is verified and fsynced and about to be renamed into its area.
    case publishing(serial: UInt64)
    /// The attempt is settled: its verdict, and what the partial keeps now.
    case attemptSettled(serial: UInt64, AttemptVerdict, partial: PartialFacts)
    /// The retry timer `token` fired.
    case retryDue(token: UInt64)
    /// The engine is shutting down: stop, keep everything for the restart.
    case shutdown
    /// Loaded from the state store at start-up; `callers` stored tokens came with it.
    case recovered(callers: Int)
    /// A caller asked for a completed download whose file is gone: start over under the same id.
    case fileVanished
    /// The completed file should live in its storage class's area; `inPlace`: it already does.
    case placementWanted(inPlace: Bool)
    /// A move between areas ended (placed or given up).
    case moveEnded
    /// The operator paused the download (`POST /admin/downloads/{id}/pause`). `partial`: what it keeps now.
    case operatorPaused(partial: PartialFacts)
    /// The operator lifted the hold; `callers` (callers and readers) are left.
    case operatorResumed(callers: Int)
    /// The download is removed (by the operator, or by retention): the engine forgets it next.
    case removed
}

/// What the kept partial file holds, as far as decisions go.
struct PartialFacts: Equatable, Sendable {
    var keptBytes: Int64
    /// A strong validator is known, so the kept bytes can be resumed with `If-Range`.
    var resumable: Bool

    static let empty = PartialFacts(keptBytes: 0, resumable: false)
}

/// How a settled attempt ended.
enum AttemptVerdict: Equatable, Sendable {
    /// The file is verified, durable and in its area.
    case published
    /// The whole body arrived but failed verification or publishing: final, even for an abandoned attempt.
    case rejected(DownloadFailure, discardPartial: Bool)
    /// The attempt ended without a whole file.
    case ended(AttemptEnd)
}

/// An attempt that ended without a whole file: what it means for the next one.
struct AttemptEnd: Equatable, Sendable {
    /// The kept bytes are unusable (a partial answer that does not fit): discard them and forget
    /// the validator, whatever happens next.
    var restart = false
    /// Fail the download with this (unless the attempt was abandoned); nil: retry.
    var failure: DownloadFailure?
    /// Drop the kept bytes along with `failure` (the origin says the file is gone, or they cannot be used).
    var discardPartial = false
    /// The origin's `Retry-After`, for the retry's delay.
    var retryAfter: String?
    /// The origin's status when the attempt ended on an HTTP answer.
    var httpStatus: Int?
    /// Why, for the message of `retries_exhausted`.
    var reason = "unusable answer"
    /// The download's code if this was the last attempt allowed (`RetryPolicy.exhaustionCode`).
    var exhaustionCode: DownloadFailure.Code = .retriesExhausted
    /// The attempt kept at least `progressBytes` new bytes: the count of attempts (and the
    /// backoff) starts again, so a link that drops every few minutes still finishes a long download.
    var progressed = false
    /// The attempt could not open its file for want of descriptors or memory (`isShortage`): the
    /// origin was not asked, so it does not count against `maxAttempts`; it is tried again after
    /// `shortageDelay`, at most `maxShortages` times in a row.
    var shortage = false
    /// The disk (or quota) is full (`isNoSpace`): the kept bytes stay and the download waits for
    /// space (`SpaceWait`), not counted against `maxAttempts`; after `maxSpaceWaits` it fails `disk_full`.
    var noSpace = false

    static let progressBytes: Int64 = 1 << 20
    static let shortageDelay = "5"
    static let maxShortages = 60

    /// Out of descriptors (this process's or the system's) or kernel memory: the disk is fine and
    /// the shortage passes.
    static func isShortage(_ errno: Int32) -> Bool { errno == EMFILE || errno == ENFILE || errno == ENOMEM }

    /// A disk error that passes (a shortage, or a full disk): the attempt is tried again.
    static func passes(_ errno: Int32) -> Bool { isShortage(errno) || SystemError(errno: errno, function: "").isNoSpace }
}
