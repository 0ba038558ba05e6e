import Foundation

// Cluster mode: letting a download go. One no longer live has its final row written, is evicted
// from memory (its row stays) and its lease released; one whose lease was lost is evicted at once
// without writing anything more.
extension EngineCore {
    /// Under `lock`, after `record` changed: once it is no longer live, its final row is written,
    /// it is evicted and its lease released (on the cluster queue).
    /// A completed download lingers first (`LeaseLinger`): checked again once that time is up.
    func clusterCheck(_ record: DownloadRecord) {
        guard let cluster, let hold = record.lease, !hold.releasing, !shuttingDown, !isLive(record) else { return }
        if let wait = cluster.linger.remaining(until: hold.lingersUntil, now: clock.monotonic()) {
            guard !hold.lingerCheckDue else { return }
            hold.lingerCheckDue = true
            effects.append { [self] in
                _ = scheduler.schedule(after: wait) { [weak self] in
                    guard let self else { return }
                    decide {
                        hold.lingerCheckDue = false
                        if let id = hold.id, let record = byID[id], record.lease === hold { clusterCheck(record) }
                    }
                }
            }
            return
        }
        hold.releasing = true
        effects.append { [self] in cluster.queue.async { self.releaseAndEvict(hold) } }
    }

    /// Under `lock`, when `record` completed or a caller joined it: a completed download stays held
    /// a little longer (`LeaseLinger`), so a burst of callers on every replica finds one holder.
    func clusterLinger(_ record: DownloadRecord) {
        guard let cluster, let hold = record.lease,
              let until = cluster.linger.until(completed: record.state == .completed, now: clock.monotonic()) else { return }
        hold.lingersUntil = max(hold.lingersUntil ?? until, until)
    }

    private enum Eviction { case evicted, kept, again, gone }

    /// Cluster queue: writes the download's final row (fenced), evicts it, releases its lease.
    private func releaseAndEvict(_ hold: LeaseHold) {
        guard let cluster else { return }
        cluster.adoption.lock(hold.key)
        defer { cluster.adoption.unlock(hold.key) }
        for _ in 0..<3 {
            stateWriter.flush()
            guard stateWriter.lastError == nil else { break }
            let outcome: Eviction = decide {
                guard let id = hold.id, let record = byID[id], record.lease === hold else { return .gone }
                if isLive(record) || shuttingDown {
                    hold.releasing = false
                    return .kept
                }
                if cluster.linger.remaining(until: hold.lingersUntil, now: clock.monotonic()) != nil {
                    hold.releasing = false  // Joined since the decision: it lingers on, checked again later.
                    clusterCheck(record)
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

    /// Cluster queue: a lease granted for a download that was never created (or whose download was
    /// forgotten) is given back, once a forgotten download's deletion (fenced by it) is written: a
    /// commit that failed is tried again shortly while the lease is renewed (until it stops).
    func releaseUnused(_ hold: LeaseHold) {
        guard let cluster else { return }
        stateWriter.flush()
        if stateWriter.lastError != nil, !hold.isStopped, !locked({ shuttingDown }) {
            scheduler.schedule(after: 1) { [weak self] in
                guard let self else { return }
                cluster.queue.async { self.releaseUnused(hold) }
            }
            return
        }
        cluster.adoption.lock(hold.key)
        defer { cluster.adoption.unlock(hold.key) }
        cluster.keeper.remove(hold)
        if hold.stop() { _ = try? cluster.leases.release(key: hold.key, epoch: hold.epoch) }
    }

    /// Under `lock`: the download leaves memory (its row stays): its tokens, its slot (given to the
    /// next waiting download) and its pending row change go.
    func evict(_ record: DownloadRecord) {
        byID[record.id] = nil
        unindex(record)
        unindexCompleted(record)
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
        resumeShutdownIfDrained()
    }

    /// Under `lock`, from `forget`: the row goes too (the id is remembered so the writer deletes it),
    /// and the lease is released.
    func clusterForget(_ record: DownloadRecord) {
        guard let cluster else { return }
        if cluster.forgotten.count >= EngineCluster.forgottenLimit, let any = cluster.forgotten.keys.first {
            cluster.forgotten.removeValue(forKey: any)
        }
        cluster.forgotten.updateValue(removalFence(of: record), forKey: record.id)
        guard let hold = record.lease else { return }
        if cluster.held[hold.key] === record { cluster.held[hold.key] = nil }
        effects.append { [self] in cluster.queue.async { self.releaseUnused(hold) } }
    }

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
            evictUnheld(record)
        }
    }

    /// Under `lock`: `record`'s lease stopped: its transfer is cancelled and it leaves memory with
    /// nothing more told or written (the replica that takes the lease over carries it on). Also
    /// from an attempt that settles after its lease stopped, before `leaseStopped` comes: its end
    /// (a refused write, a file not published) is no verdict on the download.
    func evictUnheld(_ record: DownloadRecord) {
        if let handle = record.attempt?.handle { effects.append { handle.cancel() } }
        if let tail = record.tail { effects.append { tail.update { $0.phase = .removed } } }
        evict(record)
    }

    /// Under `lock`: whether the row of an id no longer in memory is deleted (single process: always;
    /// cluster mode: only when forgotten or removed on purpose, not when evicted).
    func deletesRow(of id: String) -> Bool {
        guard let cluster else { return true }
        return cluster.forgotten.keys.contains(id) || tombstones[id] != nil
    }
}
