import Basics
import Foundation
import Glibc

// Cluster mode: a replica holds a download's lease (by coalescing key) while the download is live in
// its engine (queued, transferring, settling, moving its file, or followed by `/fetch` readers).
// Only the holder changes the download; every row it writes is fenced by its epoch
// (`PostgresStateStore.fenceHolds`) and every body write checks the lease's local deadline
// (`LeaseHold.mayWrite`). When the download stops being live, the holder writes its final row,
// evicts it from memory (its row stays) and releases the lease. A lost lease (refused or failed
// renewal, passed deadline) stops the transfer at once and evicts without writing anything more.
// Every replica takes over lapsed leases every TTL/3 and resumes their transfers from the durable
// offset. In a single process (`cluster == nil`) nothing here does anything.
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

    // MARK: Joining

    /// Before a request joins `key` (no lock held): makes sure this replica holds the key's lease
    /// and has its download (if there is one) in memory, adopted from the database. Throws
    /// `heldElsewhere` when another replica holds it.
    func clusterPrepare(_ key: CoalescingKey) throws(EngineError) {
        guard let cluster else { return }
        let name = key.leaseName
        cluster.adoption.lock()
        defer { cluster.adoption.unlock() }
        if locked({ byURL[key] != nil || cluster.pending[name] != nil }) { return }
        if let hold = try takeAndAdopt(name, cluster) {
            locked { cluster.pending[name] = hold }  // A new download: created by the join.
            cluster.keeper.add(hold)
        }
    }

    /// Adoption lock held: takes lease `name` and adopts its download; returns the lease when there
    /// is no download yet. Throws `heldElsewhere` when another replica holds it.
    private func takeAndAdopt(_ name: String, _ cluster: EngineCluster) throws(EngineError) -> LeaseHold? {
        switch take(name, cluster) {
        case .unreachable:
            throw .databaseUnavailable()
        case .heldBy(let url):
            throw .heldElsewhere(ownerURL: url)
        case .granted(let hold, let grant, let row):
            guard let row else { return hold }
            adopt(row, hold, grant, cluster)
            return nil
        }
    }

    /// Before an action on download `id` (a cancel, an operator action; no lock held): when nobody
    /// holds it, this replica takes its lease and adopts it, so the ordinary engine code acts on
    /// it; `clusterSettle(id:)` afterwards keeps it (live) or releases and evicts it. An id the
    /// database does not know is left alone (the action answers as for an unknown id). Throws
    /// `heldElsewhere` when another replica holds it.
    func clusterAdopt(id: String) throws(EngineError) {
        guard let cluster else { return }
        cluster.adoption.lock()
        defer { cluster.adoption.unlock() }
        if locked({ byID[id] != nil }) { return }
        let found: String?
        do throws(StateStoreError) {
            found = try cluster.store.leaseKey(ofID: id)
        } catch {
            throw .databaseUnavailable()
        }
        guard let name = found, !locked({ cluster.pending[name] != nil || cluster.held[name] != nil }) else { return }
        if let unused = try takeAndAdopt(name, cluster) {
            cluster.keeper.remove(unused)
            if unused.stop() { _ = try? cluster.leases.release(key: unused.key, epoch: unused.epoch) }
        }
    }

    /// `clusterAdopt(id:)` for the download of caller token `token`; returns its id (nil: unknown).
    func clusterAdopt(token: String) throws(EngineError) -> String? {
        let hash = TokenHash(token: token)
        if let id = locked({ tokens[hash] }) { return id }
        guard let cluster else { return nil }
        let found: String?
        do throws(StateStoreError) {
            found = try cluster.store.downloadID(ofToken: hash)
        } catch {
            throw .databaseUnavailable()
        }
        guard let id = found else { return nil }
        try clusterAdopt(id: id)
        return id
    }

    /// After an action on download `id`: a download that is not live is released and evicted.
    func clusterSettle(id: String?) {
        guard cluster != nil, let id else { return }
        decide { if let record = byID[id] { clusterCheck(record) } }
    }

    /// After a request joined `key` (no lock held): a lease granted for nothing is given back, a
    /// download that is not live (answered from its file, refused) is released and evicted.
    func clusterAfterJoin(_ key: CoalescingKey) {
        guard let cluster else { return }
        decide {
            if let hold = cluster.pending.removeValue(forKey: key.leaseName) {
                effects.append { [self] in cluster.queue.async { self.releaseUnused(hold) } }
            }
            if let record = byURL[key] { clusterCheck(record) }
        }
    }

    /// Under `lock`: a new download takes the lease granted for its key.
    func clusterAttach(_ record: DownloadRecord) {
        guard let cluster, let hold = cluster.pending.removeValue(forKey: record.key.leaseName) else { return }
        hold.id = record.id
        record.lease = hold
        cluster.held[hold.key] = record
    }

    private enum Taken {
        case granted(LeaseHold, LeaseStore.Grant, StoredDownload?)
        case heldBy(String)
        case unreachable
    }

    /// Adoption lock held: acquires `name` and reads its download's row.
    private func take(_ name: String, _ cluster: EngineCluster) -> Taken {
        let ttl = cluster.keeper.policy.ttl
        do throws(StateStoreError) {
            for _ in 0..<2 {
                let started = clock.monotonic()
                if let grant = try cluster.leases.acquire(key: name, owner: cluster.replica.owner,
                                                          ownerURL: cluster.replica.advertiseURL, ttl: ttl) {
                    let hold = LeaseHold(key: name, epoch: grant.epoch, acquiredAt: started, ttl: ttl)
                    do throws(StateStoreError) {
                        return .granted(hold, grant, try cluster.store.load(leaseKey: name))
                    } catch {
                        _ = try? cluster.leases.release(key: name, epoch: grant.epoch)
                        throw error
                    }
                }
                // Held: by another replica, or by this one's lease that was lost and has not expired yet.
                if let holder = try cluster.leases.holder(key: name) { return .heldBy(holder.url) }
            }
            return .unreachable
        } catch {
            return .unreachable
        }
    }

    /// Adoption lock held, no engine lock: takes `row` into memory under `hold`, its partial seeded
    /// for this epoch from what the previous epoch made durable (the lease row's `part_file`: its
    /// prefix up to the lease's `durable_offset` and, for a segmented download, every segment up to
    /// the durable offset the row records for it), so that the prefix and every segment resume
    /// where they stood. A download that was running carries on for its stored callers.
    private func adopt(_ row: StoredDownload, _ hold: LeaseHold, _ grant: LeaseStore.Grant, _ cluster: EngineCluster) {
        let target = store.partialDirectory + "/" + EpochFiles.partial(id: row.id, epoch: hold.epoch)
        var copied: [Range<Int64>] = []
        if row.state != .completed, row.validator != nil,
           case .copy(let from, let ranges) = EpochFiles.seed(previousPartial: grant.partFile, durableOffset: grant.durableOffset,
                                                              segments: row.segments),
           !from.contains("/") {
            copied = EpochSeeding.copy(from: store.partialDirectory + "/" + from, to: target, ranges: ranges)
        } else {
            FileStore.remove(target)
        }
        let (kept, segments) = EpochFiles.seeded(durableOffset: grant.durableOffset, segments: row.segments, copied: copied)
        // The previous epoch's partial is done with (a fenced writer can only add to its unlinked file).
        if let previous = grant.partFile, !previous.contains("/"), previous != EpochFiles.partial(id: row.id, epoch: hold.epoch) {
            FileStore.remove(store.partialDirectory + "/" + previous)
        }
        decide {
            let record = DownloadRecord(stored: row, tau: configuration.rateTimeConstant,
                                        progressInterval: configuration.progressInterval, ignoring: configuration.coalesceIgnoreQuery)
            hold.id = record.id
            record.lease = hold
            record.segments = nil
            if record.state != .completed {
                (record.finalPath, record.sha256, record.size) = (nil, nil, nil)
                record.segments = segments
                record.keptBytes = kept
                record.durableOffset = kept
                record.bytesWritten = max(kept, segments?.writtenBytes ?? 0)
                record.flushedBytes = kept
            }
            cluster.forgotten.remove(record.id)
            byID[record.id] = record
            byURL[record.key] = record
            for token in record.tokens { tokens[token] = record.id }
            indexFailed(record)
            cluster.held[hold.key] = record
            if record.state == .queued {
                // It was running on the replica that held it: it carries on here for its callers.
                if record.waitsForCredentials { record.story.pauseReason = .credentialsRequired }
                handle(.recovered(callers: record.waitsForCredentials ? 0 : record.tokens.count), for: record)
                tellRecovered(record)
            }
            save(record)
        }
        cluster.keeper.add(hold)
    }

    // MARK: Letting go

    /// Under `lock`, after `record` changed: once it is no longer live, its final row is written,
    /// it is evicted and its lease released (on the cluster queue).
    func clusterCheck(_ record: DownloadRecord) {
        guard let cluster, let hold = record.lease, !hold.releasing, !shuttingDown, !isLive(record) else { return }
        hold.releasing = true
        effects.append { [self] in cluster.queue.async { self.releaseAndEvict(hold) } }
    }

    private enum Eviction { case evicted, kept, again, gone }

    /// Cluster queue: writes the download's final row (fenced), evicts it, releases its lease.
    private func releaseAndEvict(_ hold: LeaseHold) {
        guard let cluster else { return }
        cluster.adoption.lock()
        defer { cluster.adoption.unlock() }
        for _ in 0..<3 {
            stateWriter.flush()
            guard stateWriter.lastError == nil else { break }
            let outcome: Eviction = decide {
                guard let id = hold.id, let record = byID[id], record.lease === hold else { return .gone }
                if isLive(record) || shuttingDown {
                    hold.releasing = false
                    return .kept
                }
                if unsaved.contains(id) { return .again }  // Changed since the flush: written first.
                evict(record)
                return .evicted
            }
            switch outcome {
            case .again: continue
            case .kept, .gone: return
            case .evicted:
                cluster.keeper.remove(hold)
                hold.stop()
                _ = try? cluster.leases.release(key: hold.key, epoch: hold.epoch)
                return
            }
        }
        // The final row could not be written yet: tried again shortly (the lease is renewed meanwhile).
        scheduler.schedule(after: 1) { [weak self] in
            guard let self else { return }
            cluster.queue.async { self.releaseAndEvict(hold) }
        }
    }

    /// Cluster queue: a lease granted for a download that was never created is given back.
    private func releaseUnused(_ hold: LeaseHold) {
        guard let cluster else { return }
        stateWriter.flush()  // A forgotten download's deletion first.
        cluster.adoption.lock()
        defer { cluster.adoption.unlock() }
        cluster.keeper.remove(hold)
        if hold.stop() { _ = try? cluster.leases.release(key: hold.key, epoch: hold.epoch) }
    }

    /// Under `lock`: the download leaves memory (its row stays): its tokens, its slot (given to the
    /// next waiting download) and its pending row change go.
    func evict(_ record: DownloadRecord) {
        byID[record.id] = nil
        if byURL[record.key] === record { byURL[record.key] = nil }
        for token in record.tokens where tokens[token] == record.id { tokens[token] = nil }
        failedRecords[record.id] = nil
        unsaved.remove(record.id)
        slots.leave(record.id)
        if let next = slots.release(record.id, granting: !shuttingDown), let nextRecord = byID[next] {
            handle(.slotGranted, for: nextRecord)
        }
        stats.activeTransfers = slots.active
        if let hold = record.lease, cluster?.held[hold.key] === record { cluster?.held[hold.key] = nil }
        if let told = cluster?.evicted, !shuttingDown {
            let (row, tail) = (record.stored(), record.state == .completed ? record.tailState(partialPath: "") : nil)
            effects.append { told(row, tail) }
        }
    }

    /// Under `lock`, from `forget`: the row goes too (the id is remembered so the writer deletes it),
    /// and the lease is released.
    func clusterForget(_ record: DownloadRecord) {
        guard let cluster else { return }
        if cluster.forgotten.count >= EngineCluster.forgottenLimit, let any = cluster.forgotten.first { cluster.forgotten.remove(any) }
        cluster.forgotten.insert(record.id)
        guard let hold = record.lease else { return }
        if cluster.held[hold.key] === record { cluster.held[hold.key] = nil }
        effects.append { [self] in cluster.queue.async { self.releaseUnused(hold) } }
    }

    // MARK: Lost leases

    /// A lease stopped (keeper's thread, or a refused body write): the transfer is cancelled at once
    /// and the download evicted without writing anything more; its row and partial stay for the
    /// replica that takes the lease over.
    func leaseStopped(_ hold: LeaseHold) {
        guard let cluster else { return }
        cluster.fenced.add(1, ordering: .relaxed)
        cluster.keeper.remove(hold)
        decide {
            if cluster.pending[hold.key] === hold { cluster.pending[hold.key] = nil }
            guard let id = hold.id, let record = byID[id], record.lease === hold else { return }
            if let handle = record.attempt?.handle { effects.append { handle.cancel() } }
            if let tail = record.tail { effects.append { tail.update { $0.phase = .removed } } }
            evict(record)
        }
    }

    /// Before a body write under `lease` (transfer thread; the prefix's and every segment's): once
    /// the lease may no longer write (its local deadline passed, or it stopped) the write is refused
    /// and the lease stops (a fenced write, counted once).
    func checkWrite(under lease: LeaseHold?) throws(SystemError) {
        guard let lease, !lease.mayWrite(now: clock.monotonic()) else { return }
        writeFenced(lease)
        throw SystemError(errno: EPERM, function: "write (the download's lease was lost)")
    }

    /// A body write was refused because `hold` may no longer write (transfer thread).
    func writeFenced(_ hold: LeaseHold) {
        guard let cluster, hold.stop() else { return }
        cluster.queue.async { [weak self] in self?.leaseStopped(hold) }
    }

    /// Under `lock`, taking a batch for the state writer: the row of `record`, fenced by its lease;
    /// nil when its lease may no longer write (counted).
    func batchRow(of record: DownloadRecord) -> StoredDownload? {
        var row = record.stored()
        guard let hold = record.lease else { return row }
        guard hold.mayWrite(now: clock.monotonic()) else {
            cluster?.fenced.add(1, ordering: .relaxed)
            return nil
        }
        row.fence = LeaseFence(key: hold.key, epoch: hold.epoch, partFile: EpochFiles.partial(id: record.id, epoch: hold.epoch))
        return row
    }

    /// Under `lock`: whether the row of an id no longer in memory is deleted (single process: always;
    /// cluster mode: only when forgotten or removed on purpose, not when evicted).
    func deletesRow(of id: String) -> Bool {
        guard let cluster else { return true }
        return cluster.forgotten.contains(id) || tombstones[id] != nil
    }

    // MARK: Takeover

    /// Cluster queue: takes over leases whose holder stopped renewing them (a higher epoch), adopts
    /// their downloads and resumes them from the durable offset (`Range`/`If-Range`).
    func takeOverLapsed() {
        guard let cluster, !locked({ shuttingDown }) else { return }
        guard let lapsed = try? cluster.leases.lapsed(limit: 16) else { return }
        for lease in lapsed where lease.key != ClusterJanitor.leaseKey {
            cluster.adoption.lock()
            defer { cluster.adoption.unlock() }
            guard !locked({ cluster.held[lease.key] != nil || cluster.pending[lease.key] != nil || shuttingDown }) else { continue }
            guard case .granted(let hold, let grant, let row) = take(lease.key, cluster) else { continue }
            guard let row else {
                _ = try? cluster.leases.release(key: hold.key, epoch: hold.epoch)
                continue
            }
            cluster.takeovers.add(1, ordering: .relaxed)
            adopt(row, hold, grant, cluster)
            decide { if let record = byID[row.id] { clusterCheck(record) } }
        }
    }

    /// The engine stops: its leases lapse at once (not released: the downloads are unfinished), and
    /// the other replicas are told (`HandOverWatch`), so they take them over at once.
    func clusterShutdown() {
        guard let cluster else { return }
        janitorShutdown()
        cluster.keeper.stop()
        cluster.handOvers.stop()
        for hold in cluster.keeper.all {
            cluster.keeper.remove(hold)
            if hold.stop() { _ = try? cluster.leases.handOver(key: hold.key, epoch: hold.epoch) }
        }
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
