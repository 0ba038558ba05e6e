import Foundation

/// A point-in-time view of one download.
public struct DownloadSnapshot: Sendable, Codable, Equatable {
    public var id: String
    /// The URL as the first caller asked for it (normalised).
    public var url: String
    public var state: DownloadState
    public var storage: StorageClass
    public var bytesWritten: Int64
    /// Total size when known.
    public var bytesExpected: Int64?
    /// bytesWritten / bytesExpected when the total is known.
    public var fraction: Double?
    /// Time-weighted EWMA of the transfer rate; 0 when not transferring.
    public var bytesPerSecond: Double
    public var etaSeconds: Double?
    /// Number of live caller tokens.
    public var callers: Int
    /// Whether the kept bytes can be resumed safely (a usable validator is known).
    public var resumable: Bool
    public var createdAt: Date
    public var updatedAt: Date
    /// Lower-case hex SHA-256 of the completed file.
    public var sha256: String?
    /// Size of the completed file.
    public var size: Int64?
    /// Absolute path of the completed file.
    public var path: String?
    /// Sanitised file name (from the URL or `Content-Disposition`).
    public var fileName: String?
    public var error: DownloadFailure?
    /// Made with caller headers (credentials): shown only to its callers (and the operator).
    public var isPrivate: Bool
    /// Why it waits: a paused download for its callers' headers (`credentials_required`, after a
    /// restart lost them), a downloading one for disk space (`disk_full`).
    public var reason: String?
    /// Segmented fetch: connections asked for, granted and in use; nil when the callers asked for one.
    public var connections: ConnectionCounts?
    /// Who paused a `paused` download (nil in every other state).
    public var pausedBy: PauseCause?
    /// When the origin's file last changed under this download (it started again from 0); nil if
    /// it never did. Every event carries it, so a reader that missed the `resumed` (`restarted`)
    /// event (dropped for a slow reader, or sent while it reconnected) still sees the change.
    public var changedAt: Date?

    public init(
        id: String, url: String, state: DownloadState, storage: StorageClass,
        bytesWritten: Int64 = 0, bytesExpected: Int64? = nil, fraction: Double? = nil,
        bytesPerSecond: Double = 0, etaSeconds: Double? = nil, callers: Int = 0, resumable: Bool = false,
        createdAt: Date, updatedAt: Date, sha256: String? = nil, size: Int64? = nil, path: String? = nil,
        fileName: String? = nil, error: DownloadFailure? = nil, isPrivate: Bool = false, reason: String? = nil,
        connections: ConnectionCounts? = nil, pausedBy: PauseCause? = nil, changedAt: Date? = nil
    ) {
        self.id = id
        self.url = url
        self.state = state
        self.storage = storage
        self.bytesWritten = bytesWritten
        self.bytesExpected = bytesExpected
        self.fraction = fraction
        self.bytesPerSecond = bytesPerSecond
        self.etaSeconds = etaSeconds
        self.callers = callers
        self.resumable = resumable
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.sha256 = sha256
        self.size = size
        self.path = path
        self.fileName = fileName
        self.error = error
        self.isPrivate = isPrivate
        self.reason = reason
        self.connections = connections
        self.pausedBy = pausedBy
        self.changedAt = changedAt
    }
}

extension DownloadSnapshot {
    /// It ran out of disk space and waits for it (`reason: disk_full`).
    public var waitsForSpace: Bool { reason == DownloadFailure.Code.diskFull.rawValue }
}

/// A segmented download's connections: what its callers asked for (the most any asked), what it
/// was granted (clamped to the operator's limit, then to segments of at least 8 MiB once the size
/// is known, or 1 when the origin does not allow ranges), and how many are open now.
public struct ConnectionCounts: Sendable, Codable, Equatable {
    public var requested: Int
    public var granted: Int
    public var active: Int

    public init(requested: Int, granted: Int, active: Int) {
        self.requested = requested
        self.granted = granted
        self.active = active
    }
}
