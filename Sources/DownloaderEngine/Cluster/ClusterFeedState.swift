/// What a replica knows of every download in the cluster, for the cluster-wide feed
/// (`ClusterFeed`): each download's view as of the newest change applied, and what each change
/// tells a watcher, in the kinds and snapshots the holder's engine publishes (`RelayDiff`). Pure.
///
/// - a row not seen before: `created`;
/// - a row seen before: what `RelayDiff` finds changed (`progress`, `paused`, `resumed`,
///   `completed`, `failed`), or nothing;
/// - a removal of a download seen: `removed`, by whom its tombstone says.
///
/// Changes between two reads of the same row are told as one (the row as it is then): every
/// replica reads the same stamped rows, so they tell the same change under the same id, though a
/// replica that read a row between two of its changes tells them apart.
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
        guard let row = change.row else {
            guard let before = views.removeValue(forKey: change.id) else { return nil }
            return .event(.removed(by: change.removedBy ?? RelayDiff.forgotten, before.snapshot))
        }
        let after = RelayDiff.View(row, ignoring: ignoring)
        guard let before = views.updateValue(after, forKey: change.id) else { return .created(after.snapshot) }
        return RelayDiff.events(from: before, to: after).last.map { .event($0) }
    }

    /// Every download's snapshot, oldest first (a fresh watcher's), at most `limit` (the newest).
    func snapshots(limit: Int = ClusterEventIDs.snapshotLimit) -> [DownloadSnapshot] {
        let all = views.values.map(\.snapshot)
            .sorted { $0.createdAt != $1.createdAt ? $0.createdAt < $1.createdAt : $0.id < $1.id }
        return Array(all.suffix(limit))
    }
}
