/// What a replica knows of every download in the cluster, for the cluster-wide feed
/// (`ClusterFeed`): each download's view as of the newest change applied, and what each change
/// tells a watcher, in the kinds and snapshots the holder's engine publishes. Pure.
///
/// - a log entry `created`: `created`, when the row is still there;
/// - a log entry `changed`: what `RelayDiff` makes of the old and new state and body version
///   (`paused`, `resumed`, `completed`, `failed`, a restart), with the row as it is now (its
///   state the entry's: a later change is told by its own entry);
/// - a log entry `removed`: `removed` of a download seen, by whom its tombstone says;
/// - a row change: `progress` when anything its snapshot shows changed.
///
/// Log entries are never overwritten and every replica reads all of them, so each tells the same
/// lifecycle event under the same id. Row changes between two reads are told as one, the row as it
/// is then (progress is the newest anyway).
struct ClusterFeedState {
    private(set) var views: [String: RelayDiff.View] = [:]
    /// The newest change version applied.
    private(set) var version: UInt64
    let ignoring: Set<String>

    init(version: UInt64, rows: [ClusterRow], ignoring: Set<String>) {
        self.version = version
        self.ignoring = ignoring
        for row in rows { views[row.stored.id] = RelayDiff.View(row, ignoring: ignoring) }
    }

    /// Applies `change` (above `version`): what it tells (nil: nothing).
    mutating func apply(_ change: ClusterFeedStore.Change) -> FeedItem.Kind? {
        guard change.version > version else { return nil }
        version = change.version
        let id = change.id
        let now = change.row.map { RelayDiff.View($0, ignoring: ignoring) }
        switch change.kind {
        case .row:
            guard let now else { return nil }
            let before = views.updateValue(now, forKey: id)
            return before == nil || before?.snapshot == now.snapshot ? nil : .event(.progress(now.snapshot))
        case .created:
            guard let now, views[id] == nil else { return nil }
            views[id] = now
            return .created(now.snapshot)
        case .changed(let from, let old, let to, let new):
            guard let seen = now ?? views[id] else { return nil }
            if now != nil { views[id] = now }
            var before = RelayDiff.View(snapshot: seen.snapshot, generation: old)
            before.snapshot.state = from
            var after = RelayDiff.View(snapshot: seen.snapshot, generation: new)
            after.snapshot.state = to
            return RelayDiff.events(from: before, to: after).last.map { .event($0) }
        case .removed(let by):
            guard let before = views.removeValue(forKey: id) else { return nil }
            return .event(.removed(by: by ?? RelayDiff.forgotten, before.snapshot))
        }
    }

    /// Downloads it knows.
    var count: Int { views.count }

    /// Every download's snapshot, oldest first (a fresh watcher's), at most `limit` (the newest).
    func snapshots(limit: Int = ClusterEventIDs.snapshotLimit) -> [DownloadSnapshot] {
        let all = views.values.map(\.snapshot)
            .sorted { $0.createdAt != $1.createdAt ? $0.createdAt < $1.createdAt : $0.id < $1.id }
        return Array(all.suffix(limit))
    }
}
