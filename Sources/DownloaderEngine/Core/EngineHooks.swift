import Glibc

/// Seams at the engine's slow disk steps so tests can hold them and observe their ends. Every hook is
/// nil in production but those the webhooks follow (`ended`, `removed`, `tokenDropped`). Set under the engine's lock (`EngineCore.hooks`); hooks run without it.
struct EngineHooks: Sendable {
    /// On the work queue, before a checkpoint's fdatasync of a partial.
    var beforeCheckpointSync: (@Sendable () -> Void)?
    /// After a checkpoint's durable offset was stored: download id and offset.
    var checkpointed: (@Sendable (String, Int64) -> Void)?
    /// On the work queue, before a completed file is placed into another storage area.
    var beforeMove: (@Sendable () -> Void)?
    /// On the work queue, before a file set aside (a discarded partial, a purged cache file) is deleted.
    var beforeRemove: (@Sendable () -> Void)?
    /// On the work queue, before an attempt's partial is opened (created when missing).
    var beforePrepare: (@Sendable () -> Void)?
    /// Stands in for pwrite(2) on partial files, direct or not (e.g. to fail with ENOSPC).
    var partialWrite: PartialFile.WriteCall?
    /// Stands in for pwrite(2) of a segmented attempt's pieces, direct or not (e.g. to hold one).
    var pieceWrite: InPlaceWrites.PositionedWrite?
    /// Stands in for fdatasync(2) on partial files (e.g. to fail with EIO).
    var partialSync: PartialFile.SyncCall?
    /// Stands in for the fsync(2) of a verified partial before it is published.
    var publishSync: PartialFile.SyncCall?
    /// After a move ended (switched, or given up): download id and the path now served.
    var moved: (@Sendable (String, String?) -> Void)?
    /// On the work queue, right before / after a verified file is renamed into its area (after the
    /// publishing intent is stored).
    var beforePublishRename: (@Sendable () -> Void)?
    var afterPublishRename: (@Sendable () -> Void)?
    /// After a download completed or failed (its final snapshot), off the lock, in order. Set in
    /// production too: the engine's `WebhookDispatcher` makes its deliveries from it.
    var ended: (@Sendable (DownloadSnapshot) -> Void)?
    /// After a download was removed (its id), off the lock: its callbacks go with it.
    var removed: (@Sendable (String) -> Void)?
    /// After a caller token was dropped to make room for a newcomer (its hash), off the lock: its
    /// callback goes with it, as at the caller's own `DELETE`.
    var tokenDropped: (@Sendable (TokenHash) -> Void)?
    /// Cluster mode: after a join took (or found) the lease for its key, before it joins: the
    /// lease's name.
    var leasePrepared: (@Sendable (String) -> Void)?
    /// Cluster mode: before a download taken over is seeded from the previous epoch's partial: its id.
    var seeding: (@Sendable (String) -> Void)?
    /// Cluster mode: stands in for the seed's copy of a partial, failing it with this errno (e.g.
    /// ENOSPC: a full shared volume); nil copies.
    var seedFailure: (@Sendable (String) -> Int32?)?

    /// Hooks that SIGKILL the process at `point` (crash tests through the real executable only).
    static func crashing(at point: CrashPoint) -> EngineHooks {
        var hooks = EngineHooks()
        let die: @Sendable () -> Void = { _ = kill(getpid(), SIGKILL) }
        switch point {
        case .beforePublishRename: hooks.beforePublishRename = die
        case .afterPublishRename: hooks.afterPublishRename = die
        case .midStateCommit: break  // Armed in the state store.
        }
        return hooks
    }
}
