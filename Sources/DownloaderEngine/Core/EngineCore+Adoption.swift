import Foundation

// Cluster mode: taking a lease and adopting its download's row into memory, for a request, an
// action, or the takeover of a lapsed lease (resumed from the durable offset under a higher epoch).
extension EngineCore {
    /// `name`'s adoption lock held: takes lease `name` and adopts its download; returns the lease
    /// when there is no download yet. Throws `heldElsewhere` when another replica holds it, and
    /// `busy` when the kept bytes found no room to be copied and `keepingBytes` (anything but a
    /// removal, which needs no bytes): the download is left as it was, its lease to lapse when it
    /// was running (taken over once there is room) or given back.
    func takeAndAdopt(_ name: String, _ cluster: EngineCluster, keepingBytes: Bool = true) throws(EngineError) -> LeaseHold? {
        switch take(name, cluster) {
        case .unreachable:
            throw .databaseUnavailable()
        case .heldBy(let url):
            throw .heldElsewhere(ownerURL: url)
        case .granted(let hold, let grant, let row):
            guard let row else { return hold }
            if adopt(row, hold, grant, cluster, keepingBytes: keepingBytes) == .noRoom {
                let running = row.state == .queued || row.state == .downloading
                if hold.stop(), !running { _ = try? cluster.leases.release(key: hold.key, epoch: hold.epoch) }
                throw .busy("the download's kept bytes could not be copied here for now (no room on the shared volume); try again shortly")
                    .about(row.id)
            }
            return nil  // Adopted, or its lease stopped while seeding: the join takes it again.
        }
    }

    enum Adoption: Equatable {
        case adopted
        /// The lease stopped while the partial was seeded: nothing adopted.
        case leaseStopped
        /// The previous epoch's durable bytes found no room to be copied (a full shared volume; or
        /// no descriptor, no memory: `EpochSeeding.lacking`): nothing adopted, rather than the
        /// download going on from 0 and its kept bytes deleted.
        case noRoom
    }

    private enum Taken {
        case granted(LeaseHold, LeaseStore.Grant, StoredDownload?)
        case heldBy(String)
        case unreachable
    }

    /// `name`'s adoption lock held: acquires `name` and reads its download's row. A lease of this
    /// replica's that stopped (its deadline passed before a renewal came back) is taken again at
    /// once under a higher epoch, rather than refused until the database lets it expire.
    private func take(_ name: String, _ cluster: EngineCluster) -> Taken {
        let ttl = cluster.keeper.policy.ttl
        let reclaiming = locked { cluster.held[name] == nil && cluster.pending[name] == nil }
        do throws(StateStoreError) {
            for _ in 0..<2 {
                let started = clock.monotonic()
                if let grant = try cluster.leases.acquire(key: name, owner: cluster.replica.owner, ownerURL: cluster.replica.advertiseURL,
                                                          ttl: ttl, reclaiming: reclaiming) {
                    let hold = LeaseHold(key: name, epoch: grant.epoch, acquiredAt: started, ttl: ttl)
                    do throws(StateStoreError) {
                        return .granted(hold, grant, try cluster.store.load(leaseKey: name))
                    } catch {
                        _ = try? cluster.leases.release(key: name, epoch: grant.epoch)
                        throw error
                    }
                }
                // Held by another replica.
                if let holder = try cluster.leases.holder(key: name) { return .heldBy(holder.url) }
            }
            return .unreachable
        } catch {
            return .unreachable
        }
    }

    /// `hold.key`'s adoption lock held, no engine lock: takes `row` into memory under `hold`, its
    /// partial seeded for this epoch from what the previous epoch made durable (the lease row's
    /// `part_file`: its prefix up to the lease's `durable_offset` and, for a segmented download,
    /// every segment up to the durable offset the row records for it), so that the prefix and every
    /// segment resume where they stood. A download that was running carries on for its stored
    /// callers.
    ///
    /// The lease is renewed from the start: seeding copies the partial, which for a large file
    /// takes longer than a lease lasts. When it stopped meanwhile, nothing is adopted
    /// (`leaseStopped`) and the previous partial stays where the lease row names it; so too when
    /// the copy lacked room (`noRoom`). Not `keepingBytes` (a removal): nothing is copied.
    private func adopt(_ row: StoredDownload, _ hold: LeaseHold, _ grant: LeaseStore.Grant, _ cluster: EngineCluster,
                       keepingBytes: Bool = true) -> Adoption {
        cluster.keeper.add(hold)
        let (seeding, failure) = locked { (hooks.seeding, hooks.seedFailure) }
        seeding?(row.id)
        let target = store.partialDirectory + "/" + EpochFiles.partial(id: row.id, epoch: hold.epoch)
        var copied: [Range<Int64>] = []
        // A publishing intent whose file is in place (verified and fsynced before the intent was
        // committed; its holder died or lost the lease before the completion's commit): completed.
        let published = row.state != .completed && row.sha256 != nil
            && row.finalPath.map { path in !path.isEmpty && FileStore.fileSize(path) == row.size } == true
        if published || !keepingBytes {
            FileStore.remove(target)  // (A removal needs no copy of the bytes it deletes.)
        } else if row.state != .completed, row.validator != nil,
           case .copy(let from, let ranges) = EpochFiles.seed(previousPartial: grant.partFile, durableOffset: grant.durableOffset,
                                                              segments: row.segments),
           !from.contains("/") {
            let seeded = failure?(row.id).map { (copied: [Range<Int64>](), lacked: EpochSeeding.lacking($0)) }
                ?? EpochSeeding.seed(from: store.partialDirectory + "/" + from, to: target, ranges: ranges)
            guard !seeded.lacked else {
                cluster.keeper.remove(hold)
                return .noRoom
            }
            copied = seeded.copied
        } else {
            FileStore.remove(target)
        }
        let (kept, segments) = EpochFiles.seeded(durableOffset: grant.durableOffset, segments: row.segments, copied: copied)
        let adopted: Bool = decide {
            // Stopped before this (under the lock): nothing to adopt. Stopped after: `leaseStopped` finds it by `hold.id`.
            guard !hold.isStopped else { return false }
            let record = DownloadRecord(stored: row, tau: configuration.rateTimeConstant,
                                        progressInterval: configuration.progressInterval, ignoring: configuration.coalesceIgnoreQuery)
            hold.id = record.id
            record.lease = hold
            record.segments = nil
            if published, let path = row.finalPath, let sha = row.sha256, let size = row.size {
                record.setCompleted(path: path, sha256: sha, size: size)
                record.lifecycle = DownloadLifecycle(restoring: .completed)
            } else if record.state != .completed {
                (record.finalPath, record.sha256, record.size) = (nil, nil, nil)
                record.segments = segments
                record.keptBytes = kept
                record.durableOffset = kept
                record.bytesWritten = max(kept, segments?.writtenBytes ?? 0)
                record.flushedBytes = kept
                record.restoreGranted(limit: connectionLimit)
            }
            cluster.forgotten.removeValue(forKey: record.id)
            byID[record.id] = record
            byURL[record.key] = record
            indexCompleted(record)
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
            return true
        }
        guard adopted else {
            FileStore.remove(target)
            return .leaseStopped
        }
        // The previous epoch's partial is done with once the lease row names this epoch's (the
        // row's first commit under this lease checkpoints it): before, a crash or a lost lease sends
        // the next holder to it. A fenced writer can only add to its unlinked file. While the lease
        // holds, that commit was not fenced out; once it stopped, the file is left to the sweep.
        if let previous = grant.partFile, !previous.contains("/"), previous != EpochFiles.partial(id: row.id, epoch: hold.epoch) {
            let path = store.partialDirectory + "/" + previous
            stateWriter.whenDurable { [workQueue, clock] in
                guard hold.mayWrite(now: clock.monotonic()) else { return }
                workQueue.async { FileStore.remove(path) }
            }
        }
        return .adopted
    }

    /// Cluster queue: takes over leases whose holder stopped renewing them (a higher epoch), adopts
    /// their downloads and resumes them from the durable offset (`Range`/`If-Range`).
    func takeOverLapsed() {
        guard let cluster, !locked({ shuttingDown }) else { return }
        guard let lapsed = try? cluster.leases.lapsed(limit: 64) else { return }
        for lease in lapsed where lease.key != ClusterJanitor.leaseKey {
            // One key's lock at a time (`EngineCluster.adoption`): let go at the end of each pass.
            cluster.adoption.lock(lease.key)
            defer { cluster.adoption.unlock(lease.key) }
            guard !locked({ cluster.held[lease.key] != nil || cluster.pending[lease.key] != nil || shuttingDown }) else { continue }
            guard case .granted(let hold, let grant, let row) = take(lease.key, cluster) else { continue }
            guard let row else {
                _ = try? cluster.leases.release(key: hold.key, epoch: hold.epoch)
                continue
            }
            switch adopt(row, hold, grant, cluster) {
            case .adopted: break
            case .leaseStopped: continue
            case .noRoom:
                _ = hold.stop()  // Left to lapse again (not given up): taken over once there is room.
                continue
            }
            cluster.takeovers.add(1, ordering: .relaxed)
            decide { if let record = byID[row.id] { clusterCheck(record) } }
        }
    }
}
