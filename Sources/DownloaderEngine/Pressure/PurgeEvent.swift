/// What a purge removed.
public enum PurgeKind: String, Sendable, CaseIterable {
    /// The kept bytes of a paused (or failed) download.
    case pausedPartial = "paused_partial"
    /// A completed file in the cache area (its download is forgotten).
    case cacheFile = "cache_file"
}

/// Why a purge happened.
public enum PurgeReason: String, Sendable, CaseIterable {
    /// The memory pressure monitor reported pressure.
    case memory
    /// A storage area's file system had less free space than `minFreeDiskBytes`.
    case disk
    /// A paused partial was older than `pausedTTL`.
    case ttl
    /// Cache usage exceeded `cacheMaxBytes`.
    case cacheLimit = "cache_limit"
    /// A client left more idle partials than `maxIdlePartialsPerClient`.
    case clientLimit = "client_limit"
}

/// One file the engine purged, reported to `DownloadEngine.onPurge` and counted in
/// `EngineStatistics.purges`. Running downloads and the persistent area are never purged.
public struct PurgeEvent: Sendable, Equatable {
    public var kind: PurgeKind
    public var reason: PurgeReason
    /// The download whose bytes went.
    public var id: String
    public var url: String
    /// Bytes freed.
    public var bytes: Int64
}

/// Counter key for `EngineStatistics.purges`.
public struct PurgeCounterKey: Hashable, Sendable {
    public var kind: PurgeKind
    public var reason: PurgeReason

    public init(kind: PurgeKind, reason: PurgeReason) {
        self.kind = kind
        self.reason = reason
    }
}
