/// What a streaming reader of a download can read right now (`DownloadReader`): the bytes of one
/// version of the file as they land on disk, then the verdict.
public struct TailState: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        /// No body is being written for the reader to follow: queued, paused, connecting, or
        /// between attempts. A reader waits (bounded by its own patience).
        case waiting
        /// The current attempt's body is landing in `path`.
        case flowing
        /// Every byte is verified (size, SHA-256 when asked for) and durable at `path`.
        case completed
        /// The download failed; `stalled` when its last attempt got no data for the stall timeout.
        case failed(DownloadFailure, stalled: Bool)
        /// The download was removed: a reader still following it is aborted.
        case removed
    }

    public var phase: Phase = .waiting
    /// Heads accepted so far (one per attempt whose body was written): a reader that must wait for
    /// the origin's answer to a resume waits for this to grow.
    public var heads: UInt64 = 0
    /// The version of the bytes: it changes whenever the body starts again from 0 (the origin's
    /// file changed, or the kept bytes could not be resumed). Bytes of two versions never mix.
    public var generation: UInt64 = 0
    /// The origin's strong validator of this version (`"etag"`, or a `Last-Modified` date), if any.
    public var validator: String?
    /// Whether `validator` is an ETag (else a date, or nothing).
    public var validatorIsETag = false
    public var contentType: String?
    /// The sanitised file name (from `Content-Disposition` or the URL; a fallback until known).
    public var fileName = ""

    /// The file's size when announced.
    public var total: Int64?
    /// Bytes of this version in the file, from offset 0, readable now (also once failed: what the
    /// file held when it failed).
    public var available: Int64 = 0
    /// Where the bytes are: the partial file while flowing, the stored file once completed.
    public var path: String = ""
    /// Identity of the file at `path` for this version: a reader opening `path` checks it.
    public var file: FileIdentity?
    /// Where the file is being moved once verified and durable: from the rename until the
    /// completion is recorded, `path` (the partial) names nothing, and a reader opening the file
    /// for the first time finds it here (the same file: `file` still holds).
    public var publishingPath: String?
    /// The stored file's SHA-256, once completed.
    public var sha256: String?

    public init() {}
}

/// Signs of a download's life that `TailState` does not show, for a streaming reader's patience
/// (`DownloadReader.liveness`): bytes landing on any of its connections (a segment's land beyond
/// the contiguous prefix the reader follows), and whether its attempt is finishing (the transfer
/// ended: the file is being verified, synced and published, which may take longer than a stall).
public struct TailLiveness: Sendable, Equatable {
    /// Batches of bytes landed so far (any connection): it grows while the download moves.
    public var landings: UInt64
    public var finishing: Bool

    public init(landings: UInt64, finishing: Bool) {
        self.landings = landings
        self.finishing = finishing
    }
}

/// A file's device and inode: the same open file whatever it is renamed to.
public struct FileIdentity: Sendable, Equatable {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}
