import Foundation

// Cluster mode: a replica holds a download's lease (by coalescing key) while the download is live in
// its engine (queued, transferring, settling, moving its file, or followed by `/fetch` readers).
// Only the holder changes the download; every row it writes is fenced by its epoch
// (`PostgresStateStore.fenceHolds`) and every body write checks the lease's local deadline
// (`LeaseHold.mayWrite`). When the download stops being live, the holder writes its final row,
// evicts it from memory (its row stays) and releases the lease. A lost lease (refused or failed
// renewal, passed deadline) stops the transfer at once and evicts without writing anything more.
// Every replica takes over lapsed leases every TTL/3 (at once after another's hand-over) and resumes
// their transfers from the durable offset. In a single process (`cluster == nil`) nothing here does
// anything. Here: the start, the files' names, liveness, the stop; joining a download through its
// lease in `+Joining`, taking and adopting (and taking over) in `+Adoption`, letting go in
// `+Eviction`, what fences writes in `+Fences`.
extension EngineCore {
    /// Starts keeping leases and looking for lapsed ones (the engine's start, after recovery).
    func startCluster() {
        guard let cluster else { return }
        cluster.keeper.onStop = { [weak self] hold, _ in self?.leaseStopped(hold) }
        cluster.keeper.onScan = { [weak self] in
            guard let self, let cluster = self.cluster,
                  cluster.scanning.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
            cluster.queue.async {
                self.takeOverLapsed()
                cluster.scanning.store(false, ordering: .releasing)
            }
        }
        let beats = HeartbeatStore(pool: cluster.store.pool)
        cluster.keeper.onBeat = { [weak self] holds in
            guard let self else { return }
            var held: [String: (leaseKey: String, epoch: Int64)] = [:]
            self.locked { for hold in holds { if let id = hold.id { held[id] = (hold.key, hold.epoch) } } }
            // A lost database is the renewals' business (they stop the leases); a heartbeat just waits for the next turn.
            _ = try? beats.write(self.heartbeats(of: held))
        }
        cluster.handOvers.onHandOver = { [weak cluster] in cluster?.keeper.searchSoon.store(true, ordering: .releasing) }
        cluster.keeper.start()
        cluster.handOvers.start()
        startJanitor()
    }

    /// The partial the download writes: `<id>.<epoch>.part` under a lease, else `<id>.part`.
    func partialPath(of record: DownloadRecord) -> String {
        guard let epoch = record.lease?.epoch else { return store.partialPath(id: record.id) }
        return store.partialDirectory + "/" + EpochFiles.partial(id: record.id, epoch: epoch)
    }

    /// Where a completed file is stored: under a lease, an epoch-specific name (`EpochFiles.completed`).
    func finalPath(id: String, fileName: String, storage: StorageClass, epoch: Int64?) -> String {
        guard let epoch else { return store.finalPath(id: id, fileName: fileName, storage: storage) }
        return store.area(storage) + "/" + EpochFiles.completed(id: id, epoch: epoch, name: fileName)
    }

    /// Connections a download may have (in cluster mode too: every segment's write checks the
    /// lease, and a takeover resumes every segment from its durable offset).
    var connectionLimit: Int { configuration.maxConnectionsPerDownload }

    /// Whether `record` keeps its lease: queued, running, settling, moving its file, or followed.
    func isLive(_ record: DownloadRecord) -> Bool {
        record.state == .queued || record.state == .downloading || record.lifecycle.attempt != nil
            || record.lifecycle.moving || record.readers > 0
    }

    /// The engine stops: its leases lapse at once (not released: the downloads are unfinished), and
    /// the other replicas are told (`HandOverWatch`), so they take them over at once.
    func clusterShutdown() {
        guard let cluster else { return }
        janitorShutdown()
        cluster.keeper.stop()
        cluster.handOvers.stop()
        var stopped: [(key: String, epoch: Int64)] = []
        for hold in cluster.keeper.all {
            cluster.keeper.remove(hold)
            if hold.stop() { stopped.append((hold.key, hold.epoch)) }
        }
        _ = try? cluster.leases.handOver(stopped)  // All in one round trip (bounded when the database is gone).
    }

    /// Test seam: the replica loses every lease at once (the janitor's too) without releasing or
    /// handing any over (as if it froze or died): renewals stop, transfers are cancelled, nothing more is written. Its
    /// leases lapse after the TTL and other replicas take them over.
    func clusterAbandonForTests() {
        guard let cluster else { return }
        cluster.keeper.stop()
        cluster.handOvers.stop()
        cluster.janitor.abandonForTests()
        let holds: [LeaseHold] = locked { Array(cluster.held.values.compactMap(\.lease)) + Array(cluster.pending.values) }
        for hold in holds where hold.stop() { leaseStopped(hold) }
    }
}
