import Foundation

// Cluster mode's purges: the replica holding the janitor lease (`ClusterJanitor`) sweeps every
// download in the database with the single process's rules (`JanitorPlan`): the cache budget, a low
// disk of the shared areas, the paused TTL, `--cache-ttl` retention, the bounds on failures and on
// empty paused downloads. Each purge acts on one download nobody holds, under that download's own
// lease: the janitor takes it (under that key's adoption lock, so this replica's requests for it
// wait), checks the row is as surveyed, writes the change fenced by that epoch, releases the lease,
// and only then deletes the files the row no longer names. A download another replica holds is
// skipped, not purged through its holder: a replica holds a download only while it is live (queued,
// transferring, moving its file, read by `/fetch`), and the purges never touch a live download; the
// next sweep finds it again once it is let go. So a file being written is never deleted: only the
// lease's holder writes, and the janitor acts only on leases it took itself. Memory pressure is a
// replica's own and the areas are a shared volume: it purges nothing here. Each purge is counted,
// logged and told in the download's story on the janitor, as in the single process.
extension EngineCore {
    /// Sweeps run at least this often: the pressure interval, retention's check interval, TTL/3.
    var janitorSweepInterval: Double {
        var interval = configuration.pressureInterval
        if let ttl = configuration.cacheTTL, ttl > 0 { interval = min(interval, RetentionSchedule.checkInterval(ttl: ttl)) }
        if let cluster { interval = min(interval, cluster.janitor.policy.interval) }
        return max(0.25, interval)
    }

    /// Starts the janitor's turns (cluster mode; from `startCluster`).
    func startJanitor() {
        guard cluster != nil else { return }
        scheduleJanitorTurn(after: 0)
    }

    private func scheduleJanitorTurn(after delay: Double) {
        scheduler.schedule(after: delay) { [weak self] in
            guard let self, let janitor = self.cluster?.janitor else { return }
            janitor.queue.async { self.janitorTurn() }
        }
    }

    /// Janitor queue: keeps (or tries to take) the janitor lease and sweeps when due.
    func janitorTurn() {
        guard let cluster, !locked({ shuttingDown }) else { return }
        let janitor = cluster.janitor
        let interval = janitorSweepInterval
        if janitor.keep() != nil {
            if janitor.sweepDue(interval: interval) { sweepCluster() }
            if janitor.orphanSweepDue(interval: configuration.orphanSweepInterval) { sweepOrphans() }
        }
        scheduleJanitorTurn(after: janitor.turn(sweepInterval: interval))
    }

    /// One sweep: the survey, the plan, then each purge while this replica is still the janitor.
    /// Returns the purges carried out.
    @discardableResult
    func sweepCluster() -> Int {
        guard let cluster else { return 0 }
        let plan = JanitorPlan(configuration, diskPressure: diskPressure)
        // Bytes the last sweep's deletions are still freeing count as free on their file system
        // (read before the samples: counted twice rather than missed).
        let freeing = [self.freeing.pending(.cache), self.freeing.pending(.partials)]
        let sampled = [store.cacheDirectory, store.partialDirectory].map { pressure.space(of: $0) }
        let spaces = sampled.compactMap { space -> DiskSpace? in
            guard var space else { return nil }
            for (other, bytes) in zip(sampled, freeing) where other?.fileSystem == space.fileSystem {
                space.free = DiskSpace.adding(bytes, to: space.free)
            }
            return space
        }
        let disk = spaces.min { $0.free < $1.free }
        let low = disk.map { diskPressure.isLow(free: $0.free, total: $0.total) } ?? false
        guard let survey = try? cluster.janitor.store.survey(plan, localNow: ageing.now(clock), budgets: low || configuration.cacheMaxBytes != nil) else {
            return 0
        }
        var done = 0
        for action in plan.actions(survey, now: survey.now, memory: false, disk: disk) {
            guard cluster.janitor.isJanitor, !locked({ shuttingDown }) else { break }
            if carryOut(action, cluster) { done += 1 }
        }
        // The lease rows of downloads gone (purged, removed) go too, a batch a sweep.
        if cluster.janitor.isJanitor {
            _ = try? cluster.leases.forgetIdle(limit: JanitorStore.batch, keeping: ClusterJanitor.leaseKey)
        }
        return done
    }

    /// Carries `action` out under the download's own lease; false when it was skipped (held, changed
    /// since the survey, fenced, or the database did not answer).
    private func carryOut(_ action: JanitorAction, _ cluster: EngineCluster) -> Bool {
        let surveyed = action.row
        guard let key = surveyed.leaseKey else { return false }
        cluster.adoption.lock(key)
        defer { cluster.adoption.unlock(key) }
        guard !locked({ byID[surveyed.id] != nil || cluster.held[key] != nil || cluster.pending[key] != nil }) else { return false }
        let ttl = cluster.keeper.policy.ttl
        let started = clock.monotonic()
        guard let grant = try? cluster.leases.acquire(key: key, owner: cluster.replica.owner, ownerURL: cluster.replica.advertiseURL,
                                                      ttl: ttl) else { return false }  // Held by another replica: skipped.
        let hold = LeaseHold(key: key, epoch: grant.epoch, acquiredAt: started, ttl: ttl)
        defer { _ = try? cluster.leases.release(key: key, epoch: grant.epoch) }
        guard let row = try? cluster.store.load(id: surveyed.id),
              JanitorRow(row, leaseKey: key) == surveyed, hold.mayWrite(now: clock.monotonic()) else { return false }
        let fence = LeaseFence(key: key, epoch: grant.epoch, partFile: EpochFiles.partial(id: row.id, epoch: grant.epoch))
        // The partial the last epoch wrote (nobody writes it now: its lease is this one).
        let partial = grant.partFile.flatMap { $0.contains("/") || $0.isEmpty ? nil : store.partialDirectory + "/" + $0 }
        let file = row.finalPath.flatMap { $0.hasPrefix(store.cacheDirectory + "/") && !$0.dropFirst(store.cacheDirectory.count + 1)
                                                .contains("/") ? $0 : nil }
        let janitorStore = cluster.janitor.store
        let shown = QueryParameters.redacting(row.url, names: configuration.coalesceIgnoreQuery)
        let written: Bool?
        let files: [String]
        var event: PurgeEvent?
        // What each file frees, counted as free until it is deleted.
        func freed(_ path: String) -> (bytes: Int64, area: FreeingBytes.Area) {
            path == file ? (row.size ?? 0, .cache) : (row.verifiedOffset, .partials)
        }
        switch action {
        case .purgePartial(_, let reason, let forget):
            files = [partial].compactMap { $0 }
            if forget {
                written = try? janitorStore.delete(row.id, fence: fence)
            } else {
                var purged = row
                (purged.verifiedOffset, purged.segments, purged.updatedAt) = (0, nil, clock.now())
                written = try? janitorStore.update(purged, fence: fence)
            }
            event = PurgeEvent(kind: .pausedPartial, reason: reason, id: row.id, url: shown, bytes: row.verifiedOffset)
        case .purgeCacheFile(_, let reason):
            files = [file, partial].compactMap { $0 }
            written = try? janitorStore.delete(row.id, fence: fence)
            event = PurgeEvent(kind: .cacheFile, reason: reason, id: row.id, url: shown, bytes: row.size ?? 0)
        case .expire:
            files = [file, partial].compactMap { $0 }
            let tombstone = Tombstone(id: row.id, url: shown, removedAt: clock.now(), by: .retention, paths: files, fence: fence)
            written = try? janitorStore.delete(row.id, fence: fence, tombstone: tombstone)
            event = PurgeEvent(kind: .cacheFile, reason: .ttl, id: row.id, url: shown, bytes: row.size ?? 0)
        case .forget:
            files = [partial].compactMap { $0 }
            written = try? janitorStore.delete(row.id, fence: fence)
        }
        guard written == true else { return false }
        let before = hooks.beforeRemove
        for path in files {
            let frees = freed(path)
            freeing.add(frees.bytes, in: frees.area)
            deleteInBackground(path, before: before, freeing: frees)
        }
        decide {
            // The purge is told first, then the removal (as the single process tells it, and README reads).
            if let event { notePurge(event) }
            if case .expire = action { tell(.removed(by: .retention), id: row.id, url: shown) }
        }
        return true
    }

    /// The engine stops: the janitor lease is released (from `clusterShutdown`).
    func janitorShutdown() {
        cluster?.janitor.stop()
    }
}
