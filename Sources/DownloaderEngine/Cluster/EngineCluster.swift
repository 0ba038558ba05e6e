import Foundation
import Synchronization

/// Cluster mode's part of the engine (nil in a single process): who this replica is, the leases it
/// keeps, and the downloads they cover. Invariant: every download in the engine's memory holds its
/// lease (`DownloadRecord.lease`); a download nobody holds lives only in the database.
final class EngineCluster: @unchecked Sendable {
    let replica: ClusterReplica
    let store: PostgresStateStore
    let leases: LeaseStore
    let keeper: LeaseKeeper
    /// Other replicas' hand-overs, which start the search for lapsed leases at once.
    let handOvers: HandOverWatch
    /// The cluster-wide purges, on the replica holding the janitor lease.
    let janitor: ClusterJanitor
    /// One acquisition, adoption, takeover or release at a time per lease key (`LeaseHold.key`,
    /// `CoalescingKey.leaseName`): database round trips and the seeding of a partial happen under
    /// it, never under the engine's lock. Per key, so that a takeover copying a large partial holds
    /// up only its own download, never requests and adoptions of other keys.
    ///
    /// Lock order (deadlock freedom): a thread holds at most one key's adoption lock at a time (a
    /// scan over many keys, like `takeOverLapsed`, takes and lets go of each in turn), and takes it
    /// never while holding the engine's lock (which it takes and lets go of inside, as the innermost
    /// lock). Nothing under it waits for another key's adoption lock or for the cluster queue (the
    /// state writer's flush, waited for under it, takes neither).
    let adoption = KeyedLocks<String>()
    /// Releases, takeovers and stopped leases are handled here, off the engine's lock and off the
    /// keeper's thread.
    let queue = DispatchQueue(label: "download-engine.cluster")
    let takeovers = Atomic<Int64>(0)
    /// Stopped leases and file writes refused by a lost lease (rows the database refused are
    /// `PostgresStateStore.fencedRows`).
    let fenced = Atomic<Int64>(0)
    let scanning = Atomic<Bool>(false)
    /// How long a completed download stays held after its completion or its last join.
    let linger: LeaseLinger

    // Under the engine's lock.
    /// Leases granted for a key whose download is not created yet (a new URL's first request).
    var pending: [String: LeaseHold] = [:]
    /// The download each held lease covers, by lease key.
    var held: [String: DownloadRecord] = [:]
    /// Downloads forgotten on purpose (bounded failures, empty paused ones): their rows are deleted.
    /// Any other id the engine no longer knows was evicted (its row stays).
    /// Each with the lease it was held under (its deletion is fenced by it; nil: none).
    var forgotten: [String: LeaseFence?] = [:]
    static let forgottenLimit = 10_000
    /// Told of every download evicted while the engine runs (an effect, after the download's earlier
    /// events), with its last row and, when completed, what a reader of its file sees: `ClusterReads`
    /// hands its subscribers over to the relay and remembers its file. Set once, at start.
    var evicted: (@Sendable (StoredDownload, TailState?) -> Void)?

    init(database: ClusterDatabase, replica: ClusterReplica, monotonic: @escaping @Sendable () -> Double) {
        self.replica = replica
        linger = LeaseLinger(seconds: max(0, replica.completedLinger))
        store = database.store
        leases = LeaseStore(pool: database.pool)
        keeper = LeaseKeeper(policy: LeasePolicy(ttl: replica.leaseTTL), store: leases, monotonic: monotonic)
        janitor = ClusterJanitor(leases: leases, replica: replica, monotonic: monotonic)
        handOvers = HandOverWatch(pool: database.pool)
    }

    var statistics: ClusterStatistics {
        var s = ClusterStatistics()
        s.leasesHeld = keeper.count
        s.takeovers = takeovers.load(ordering: .relaxed)
        s.fencedWrites = fenced.load(ordering: .relaxed) + store.fencedRows.load(ordering: .relaxed)
        s.janitor = janitor.isJanitor
        return s
    }
}
