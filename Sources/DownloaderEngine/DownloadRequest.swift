/// One caller's ask: fetch `url` and store it in `storage`.
public struct DownloadRequest: Sendable, Equatable {
    /// Absolute `http` or `https` URL.
    public var url: String
    public var storage: StorageClass
    /// Expected lower-case hex SHA-256; the download fails with `checksum_mismatch` otherwise.
    public var sha256: String?
    /// Expected size in bytes; the download fails with `size_mismatch` otherwise.
    public var size: Int64?
    /// Who asks, as the service names it (the client's address), for the download's story only.
    public var client: String?
    /// The client's group for sharing the transfer slots (`TransferSlots`): its address, per /64
    /// for public IPv6 (as `--max-downloads-per-client` counts). A download's group is its first asker's.
    public var clientGroup: String?
    /// Headers sent to the origin (credentials for a private origin; `CallerHeaders` says which
    /// are accepted). They make the download private to callers with the same headers.
    public var headers: [String: String]

    /// Ranged connections the caller would like (segmented fetch); nil or 1: one. Clamped to
    /// `EngineConfiguration.maxConnectionsPerDownload` and to what the file's size warrants.
    public var connections: Int?

    public init(url: String, storage: StorageClass = .cache, sha256: String? = nil, size: Int64? = nil, client: String? = nil,
                headers: [String: String] = [:], connections: Int? = nil, clientGroup: String? = nil) {
        self.url = url
        self.clientGroup = clientGroup
        self.headers = headers
        self.storage = storage
        self.sha256 = sha256
        self.size = size
        self.client = client
        self.connections = connections
    }
}

/// The answer to `DownloadEngine.request(_:)`.
public struct Enqueued: Sendable {
    /// This caller's own token (≥128 random bits, hex); give it to `cancel(token:)`.
    public var token: String
    public var snapshot: DownloadSnapshot
    /// True when the caller joined a transfer (or a stored file) that already existed.
    public var coalesced: Bool
    /// True when the answer is a stored file with the asked `sha256`, found under another URL
    /// (content-addressed reuse): no origin was contacted.
    public var reused: Bool

    public init(token: String, snapshot: DownloadSnapshot, coalesced: Bool, reused: Bool = false) {
        self.token = token
        self.snapshot = snapshot
        self.coalesced = coalesced
        self.reused = reused
    }
}

/// A completed file ready to be served.
public struct CompletedFile: Sendable, Equatable {
    public var path: String
    public var fileName: String
    public var size: Int64
    public var sha256: String
    /// The origin's `Content-Type` (nil: it sent none).
    public var contentType: String?
    /// The origin's strong ETag of this version, quotes included (nil: it sent none).
    public var originETag: String?
    /// The origin's `Last-Modified` of this version when that was its strong validator (it sent no ETag).
    public var originLastModified: String?

    public init(path: String, fileName: String, size: Int64, sha256: String, contentType: String? = nil, originETag: String? = nil,
                originLastModified: String? = nil) {
        self.path = path
        self.fileName = fileName
        self.size = size
        self.sha256 = sha256
        self.contentType = contentType
        self.originETag = originETag
        self.originLastModified = originLastModified
    }
}

/// Counters for `/metrics`; every value only grows, except `subscribers` and `activeTransfers`.
public struct EngineStatistics: Sendable, Equatable {
    public var bytesFetched: Int64 = 0
    public var coalescedJoins: Int64 = 0
    public var resumes: Int64 = 0
    public var restarts: Int64 = 0
    public var retries: Int64 = 0
    /// Downloads that became `completed` (verified and durable) in this process.
    public var completions: Int64 = 0
    /// Downloads that became `failed` in this process, by code.
    public var failures: [DownloadFailure.Code: Int64] = [:]
    public var subscribers: Int = 0
    public var activeTransfers: Int = 0
    /// Downloads that ran out of disk space and wait for it (`reason: disk_full`): filled in by
    /// `/metrics` from `DownloadEngine.stateCounts()` (0 in `statistics`, which skips that pass).
    public var waitingForSpace: Int = 0
    /// Files purged so far, by kind and reason.
    public var purges: [PurgeCounterKey: Int64] = [:]
    /// Cluster mode's leases, takeovers and fenced writes (nil in a single process).
    public var cluster: ClusterStatistics?
    /// Why the state store's last commit failed (nil once one succeeds): changes are kept in
    /// memory and retried, but would not survive a crash until then.
    public var stateFailure: String?

    public init() {}
}
