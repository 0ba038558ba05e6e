// One stream of every download's events (`GET /events` in the service).
extension DownloadEngine {
    /// Every download's events. With `lastEventID` inside the history (the last
    /// `EventFeed.historyCapacity` lifecycle events of this run), exactly what followed it: the
    /// lifecycle events after it, then each download's newest progress newer than it. Otherwise a
    /// `snapshot` item per download first (oldest download first), then what follows. Ids are
    /// strictly increasing, also across restarts (reserved in the state store ahead of use).
    /// Cluster mode: every download of the cluster, ids derived from the cluster database's change
    /// versions, so that they mean the same on every replica (`ClusterFeed`).
    ///
    /// Nil when it would need a snapshot and the snapshots other watchers hold, not yet handed out,
    /// leave no room for one under `EventFeed.snapshotBudget` items (a watcher that does not read
    /// holds its whole snapshot): retry later. `exempt` (the operator's) is never refused.
    public func watchAll(after lastEventID: UInt64? = nil, exempt: Bool = false) -> FeedSubscription? {
        if let clusterFeed { return clusterFeed.watch(after: lastEventID, exempt: exempt) }
        return core.watchAll(after: lastEventID, exempt: exempt)
    }

    /// Watchers of `watchAll` open now.
    public var feedWatchers: Int { core.feed.watcherCount }
}
