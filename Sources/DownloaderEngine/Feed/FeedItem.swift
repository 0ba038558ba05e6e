/// One event of the feed of every download (`DownloadEngine.watchAll`): its id (decimal on the
/// wire, strictly increasing for a watcher, also across restarts) and what happened.
public struct FeedItem: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A download as it stood when a fresh watcher joined (the first items, oldest download first).
        case snapshot(DownloadSnapshot)
        /// A new download.
        case created(DownloadSnapshot)
        /// One of a download's own events, as its per-download subscribers get it.
        case event(DownloadEvent)

        public var snapshot: DownloadSnapshot {
            switch self {
            case .snapshot(let s), .created(let s): s
            case .event(let event): event.snapshot
            }
        }
    }

    public var id: UInt64
    public var kind: Kind

    public init(id: UInt64, kind: Kind) {
        self.id = id
        self.kind = kind
    }
}
