/// What a relay (`SubscriptionRelay`) publishes when a download's row changed between two polls,
/// in the event kinds and snapshots the holder's engine publishes. Pure.
///
/// - the row is gone: `removed`, by whom its tombstone says (`removedBy`), with the last snapshot;
/// - a new state: `completed`, `failed`, `paused` (its snapshot says by whom), `resumed` when it
///   runs again (from what it had kept, or `restarted` from 0 when the body's version changed), a
///   `progress` for `queued`;
/// - the same state with a new body version while downloading: `resumed` from 0, `restarted`;
/// - anything else the snapshot shows changed (bytes, callers, rate, …): `progress`.
enum RelayDiff {
    /// A download as a poll saw it.
    struct View: Sendable, Equatable {
        var snapshot: DownloadSnapshot
        /// The body's version (`StoredDownload.generation`).
        var generation: UInt64

        init(snapshot: DownloadSnapshot, generation: UInt64) {
            self.snapshot = snapshot
            self.generation = generation
        }

        init(_ row: ClusterRow, ignoring: Set<String>) {
            self.init(snapshot: row.snapshot(ignoring: ignoring), generation: row.stored.generation)
        }
    }

    /// Who removed a download whose row went without a tombstone: the service's own bounds (a
    /// purged cache file, an expired paused download, a bounded failure). The operator's removal
    /// always leaves one.
    static let forgotten = RemovalCause.retention

    static func events(from before: View, to after: View?, removedBy: RemovalCause = forgotten) -> [DownloadEvent] {
        guard let after else { return [.removed(by: removedBy, before.snapshot)] }
        let (old, new) = (before.snapshot, after.snapshot)
        let restarted = after.generation != before.generation
        if new.state != old.state {
            switch new.state {
            case .completed: return [.completed(new)]
            case .failed: return [.failed(new)]
            case .paused: return [.paused(new)]
            case .queued: return [.progress(new)]
            case .downloading:
                let kept = old.state == .completed ? 0 : min(old.bytesWritten, new.bytesWritten)
                return [.resumed(offset: restarted ? 0 : kept, restarted: restarted, new)]
            }
        }
        if new.state == .downloading && restarted { return [.resumed(offset: 0, restarted: true, new)] }
        return new == old ? [] : [.progress(new)]
    }
}
