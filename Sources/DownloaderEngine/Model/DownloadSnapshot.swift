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
    /// Who paused a `paused` download (nil in every other state).
    public var pausedBy: PauseCause?

    public init(
        id: String, url: String, state: DownloadState, storage: StorageClass,
        bytesWritten: Int64 = 0, bytesExpected: Int64? = nil, fraction: Double? = nil,
        bytesPerSecond: Double = 0, etaSeconds: Double? = nil, callers: Int = 0, resumable: Bool = false,
        createdAt: Date, updatedAt: Date, sha256: String? = nil, size: Int64? = nil, path: String? = nil,
        fileName: String? = nil, error: DownloadFailure? = nil, pausedBy: PauseCause? = nil
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
        self.pausedBy = pausedBy
    }
}
