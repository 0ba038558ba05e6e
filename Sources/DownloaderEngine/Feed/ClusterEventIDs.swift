/// The feed's event ids in cluster mode (`ClusterFeed`), derived from the cluster's change
/// versions (`feed_versions`, stamped in commit order: `ClusterFeedStore`), so that every replica
/// gives the same change the same id and a `Last-Event-ID` from one replica means the same on
/// another. An id is `version << 20` plus a low part:
///
/// - `0`: the change stamped `version` itself (a lifecycle event, or progress kept as a slot);
/// - `1 ..< 2^19`: progress handed to a watcher while `version` was the newest change applied
///   (progress gets a fresh id when it is handed out, as in a single process);
/// - `2^19 ... 2^20 - 1`: a fresh watcher's snapshot taken at `version`, its last item ending in
///   `2^20 - 1`.
///
/// Every low part but an unfinished snapshot's means "everything up to `version` was seen": a
/// client reconnecting with it, on any replica, gets what followed `version`. Ids of one watcher
/// increase strictly because versions only grow and a version's low parts are handed out in order.
/// Pure.
struct ClusterEventIDs: Equatable {
    static let shift: UInt64 = 20
    static let snapshotBase: UInt64 = 1 << 19
    static let top: UInt64 = (1 << 20) - 1
    /// The most downloads one snapshot lists (the oldest beyond it are left out).
    static let snapshotLimit = Int(top + 1 - snapshotBase)

    /// The newest change version applied.
    private(set) var version: UInt64
    /// Progress ids handed out at `version`.
    private var handed: UInt64 = 0

    init(version: UInt64) {
        self.version = version
    }

    static func id(version: UInt64) -> UInt64 { version << shift }
    static func version(of id: UInt64) -> UInt64 { id >> shift }

    /// `id` lies inside a snapshot that may not have been seen whole (its last item is not it).
    static func isInsideSnapshot(_ id: UInt64) -> Bool {
        let low = id & top
        return low >= snapshotBase && low != top
    }

    /// The highest id that may have been handed out (a finished snapshot at `version`).
    var newest: UInt64 { (version << Self.shift) | Self.top }

    mutating func advance(to version: UInt64) {
        guard version > self.version else { return }
        self.version = version
        handed = 0
    }

    /// A fresh progress id at `version`; nil once `2^19 - 1` were handed out (the next change
    /// brings more).
    mutating func take() -> UInt64? {
        guard handed + 1 < Self.snapshotBase else { return nil }
        handed += 1
        return (version << Self.shift) | handed
    }

    /// The first id of a snapshot of `count` (at most `snapshotLimit`) downloads at `version`.
    func snapshotFirst(count: Int) -> UInt64 {
        (version << Self.shift) + Self.top + 1 - UInt64(max(1, min(count, Self.snapshotLimit)))
    }
}
