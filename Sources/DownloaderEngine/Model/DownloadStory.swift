/// One step in the life of one download, as an operator reads it in the log: told to
/// `EngineConfiguration.storyteller` once the decision it follows is made, off the engine's lock, in
/// the order the engine decided (a download's steps never arrive out of order).
public struct DownloadStory: Sendable, Equatable {
    public var id: String
    /// The download's normalised URL as the engine holds it (a URL's `user:password@` is moved into
    /// the caller's headers, but a row stored by an earlier release may still carry one: redact it
    /// before showing it anywhere).
    public var url: String
    public var event: Event

    public init(id: String, url: String, event: Event) {
        self.id = id
        self.url = url
        self.event = event
    }

    /// Who asked for a download.
    public enum Asker: String, Sendable, Equatable {
        /// `POST /downloads`: a caller with a token.
        case caller
        /// `GET /fetch`: a streaming reader, interested while it stays connected.
        case reader
    }

    /// What a response head meant for its attempt.
    public enum HeadOutcome: Sendable, Equatable {
        /// The body is written from `offset`; `restarted`: bytes kept before were discarded for it.
        case body(offset: Int64, restarted: Bool)
        /// The body was not taken; why, in a few words (e.g. `HTTP 503`, `206 for a different ETag`).
        case refused(String)
    }

    /// The validator a head offered for resuming.
    public enum ValidatorKind: String, Sendable, Equatable {
        case etag
        case lastModified = "last_modified"
        /// A weak ETag: never used for `If-Range`.
        case weakETag = "weak_etag"
        case none
    }

    /// Why a download paused.
    public enum PauseReason: String, Sendable, Equatable {
        /// Its last caller cancelled (`DELETE /downloads/{token}`).
        case callerCancelled = "caller_cancelled"
        /// Its last streaming reader went away.
        case readerLeft = "reader_left"
        /// A credentialed download after a restart: its headers were never stored.
        case credentialsRequired = "credentials_required"
        /// The operator paused it (`POST /admin/downloads/{id}/pause`).
        case `operator`
    }

    /// Why an attempt ended without the file, before a retry.
    public struct AttemptTrouble: Sendable, Equatable {
        /// A short machine word: `http_status`, `connection`, `stalled`, `connect_timeout`,
        /// `head_timeout`, `incomplete` (the body ended short), `restart` (kept bytes unusable), …
        public var cause: String
        /// What happened, in words (the transfer's message, `HTTP 503`, …).
        public var message: String
        public var httpStatus: Int?

        public init(cause: String, message: String, httpStatus: Int? = nil) {
            self.cause = cause
            self.message = message
            self.httpStatus = httpStatus
        }
    }

    public enum Event: Sendable, Equatable {
        /// The first ask for a URL made the download (`client`: the address the service gave).
        case created(storage: StorageClass, client: String?, by: Asker)
        /// Another ask joined the download (coalesced) while it was `state`; `callers` counts callers
        /// and readers now.
        case joined(client: String?, by: Asker, state: DownloadState, callers: Int)
        /// An ask brought a paused or failed download back: its next attempt asks from `offset`
        /// (0: it starts over).
        case resumed(client: String?, by: Asker, from: DownloadState, offset: Int64)
        /// Attempt `attempt` (counted within the download's current run) asked the origin from
        /// `offset`, with these `Range`/`If-Range` values (nil: not sent).
        case attemptStarted(attempt: Int, offset: Int64, range: String?, ifRange: String?)
        /// The final hop's head: its status, the file's size when it said, the validator offered.
        case headReceived(attempt: Int, status: Int, size: Int64?, validator: ValidatorKind, outcome: HeadOutcome)
        /// Attempt `attempt` ended without the file; the next starts after `delay` seconds and asks
        /// from `offset`.
        case retryScheduled(attempt: Int, trouble: AttemptTrouble, delay: Double, offset: Int64)
        /// A segmented attempt's probe decided: `connections` from now on (1: the download stays on
        /// one), from one connection's rate alone and the rate with the probe beside it (bytes/s;
        /// nil: no probe opened, the rest of the file too short for more connections to pay).
        case connectionsDecided(attempt: Int, connections: Int, aloneBytesPerSecond: Double, probedBytesPerSecond: Double?)
        case paused(reason: PauseReason, keptBytes: Int64)
        /// `seconds` since the run began (pauses included); `bytesPerSecond`: body bytes received per
        /// second of receiving; `refetchedBytes`: bytes received beyond what the file needed.
        case completed(size: Int64, sha256: String, seconds: Double, bytesPerSecond: Double, attempts: Int,
                       refetchedBytes: Int64)
        case failed(code: DownloadFailure.Code, message: String, httpStatus: Int?, attempts: Int)
        case purged(kind: PurgeKind, reason: PurgeReason, bytes: Int64)
        /// The completed file now lives in `storage`'s area, at `path`.
        case moved(storage: StorageClass, path: String)
        /// The completed file could not move into `storage`'s area: it stays (served, never purged)
        /// where it is, and the move is tried again at the next start.
        case moveFailed(storage: StorageClass, error: String)
        /// Loaded at start-up as running: it carries on for its `callers` (none: paused, bytes kept).
        case recovered(state: DownloadState, keptBytes: Int64, callers: Int)
        /// The engine shut down while it ran: it carries on at the next start.
        case stopped(bytesWritten: Int64)
        /// The operator lifted its hold; with `callers` (callers and readers) left it runs again.
        case released(callers: Int)
        /// Removed with its files and tokens, by the operator or by retention.
        case removed(by: RemovalCause)
    }
}
