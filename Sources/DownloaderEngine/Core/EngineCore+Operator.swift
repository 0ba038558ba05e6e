import Foundation

// The operator's actions on any download: pause (a hold), resume (lifting it), remove (with a
// durable tombstone); and retention, which removes cache files nobody asked for within `cacheTTL`.
extension EngineCore {
    /// Holds download `id` paused whatever its callers want. Idempotent; a completed or failed
    /// download cannot be paused. Throws `stateUnavailable` when the hold could not be committed.
    func operatorPause(id: String) throws(EngineError) -> OperatorOutcome {
        let outcome: OperatorOutcome = decide {
            guard let record = byID[id] else { return .unknown }
            guard record.state != .completed && record.state != .failed else { return .invalidState(freshSnapshot(record)) }
            if !record.lifecycle.held {
                record.updatedAt = clock.now()
                record.story.reasonBeforeHold = record.story.pauseReason
                record.story.pauseReason = .operator
                handle(.operatorPaused(partial: record.partialFacts), for: record)
            }
            return .done(freshSnapshot(record))
        }
        try durable(outcome, "the download is paused")  // The hold is durable when the operator hears of it.
        return outcome
    }

    /// Lifts the operator's hold: the download runs again if it has callers (or readers), else it
    /// stays paused. Idempotent; a completed or failed download answers `invalidState`. Throws
    /// `stateUnavailable` when lifting the hold could not be committed.
    func operatorResume(id: String) throws(EngineError) -> OperatorOutcome {
        let outcome: OperatorOutcome = decide {
            guard let record = byID[id] else { return .unknown }
            guard record.state != .completed && record.state != .failed else { return .invalidState(freshSnapshot(record)) }
            if record.lifecycle.held {
                record.updatedAt = clock.now()
                // Callers count only when their headers are here: a private download that lost them
                // in a restart waits for a caller who brings them (it would ask the origin without).
                let callers = record.waitsForCredentials ? 0 : record.interest
                // Told in order: the hold is lifted, then (no caller left) it stays paused for its
                // callers' reason, not the operator's.
                tell(.released(callers: callers), of: record)
                if record.story.pauseReason == .operator {
                    record.story.pauseReason = record.waitsForCredentials ? .credentialsRequired : record.story.reasonBeforeHold
                }
                handle(.operatorResumed(callers: callers), for: record)
            }
            return .done(freshSnapshot(record))
        }
        try durable(outcome, "the download runs again")
        return outcome
    }

    /// After an operator's change was decided: commits it now; throws `stateUnavailable` (saying
    /// `done`, what took effect) when the commit failed.
    private func durable(_ outcome: OperatorOutcome, _ done: String) throws(EngineError) {
        guard case .done = outcome, !stateWriter.flush(), let error = stateWriter.lastError else { return }
        throw .stateUnavailable(error, done)
    }

    /// Removes download `id` (its transfer, files, tokens and subscriptions) and leaves a tombstone,
    /// committed before this returns. Nil for an unknown id. Throws `stateUnavailable` when the
    /// tombstone could not be committed (the download is gone; its files go once it is).
    func remove(id: String) throws(EngineError) -> DownloadSnapshot? {
        let removed: DownloadSnapshot? = decide {
            guard let record = byID[id] else { return nil }
            return removeRecord(record, by: .operator)
        }
        if removed != nil, !stateWriter.flush(), let error = stateWriter.lastError {
            throw .stateUnavailable(error, "the download is removed and its files are deleted once that is recorded")
        }
        return removed
    }

    /// Under `lock`: the download's lifecycle stops it; `removed` ends its subscriptions; readers
    /// following its bytes are aborted (a completed file being served keeps serving: its open
    /// descriptor holds it); it is forgotten with a tombstone; its files are deleted on the work
    /// queue once the tombstone is committed (before, a crash would bring the row back without them).
    @discardableResult
    func removeRecord(_ record: DownloadRecord, by cause: RemovalCause) -> DownloadSnapshot {
        handle(.removed, for: record)
        var snapshot = freshSnapshot(record)
        snapshot.pausedBy = nil  // Stopped for good, not paused (by anyone): the event says who removed it.
        publish(.removed(by: cause, snapshot), of: record)
        if let tail = record.tail, record.state != .completed {
            effects.append { tail.update { $0.phase = .removed } }
        }
        var paths = [partialPath(of: record)]
        if let path = record.finalPath { paths.append(path) }
        if let path = record.publishing?.path { paths.append(path) }
        if let name = record.fileName {
            // Where a publishing or a placement in flight may still put the file.
            for storage in [StorageClass.cache, .persistent] {
                paths.append(finalPath(id: record.id, fileName: name, storage: storage, epoch: record.lease?.epoch))
            }
        }
        var seen = Set<String>()
        let files = paths.filter { seen.insert($0).inserted }
        tombstones.add(Tombstone(id: record.id, url: record.shownURL, removedAt: clock.now(), by: cause, paths: files,
                                 fence: removalFence(of: record)))
        tell(.removed(by: cause), of: record)
        forget(record)
        let before = hooks.beforeRemove
        let (id, removals) = (record.id, cluster?.store)
        effects.append { [self] in
            stateWriter.whenDurable { [self] in
                // Cluster mode: a removal decided under a lease that was gone by its commit is refused
                // there; the row stays (the new holder's), and so do the files it names.
                if removals?.takeRefusedRemoval(id) == true {
                    workQueue.async { [self] in decide { tombstones.remove(id: id) } }  // Nor is it read as removed here.
                    return
                }
                for path in files { deleteInBackground(path, before: before) }
            }
        }
        return snapshot
    }

    /// Under `lock`: completed cache files not requested or served for `cacheTTL` are removed
    /// (`removed` by retention), counted and logged as purges (`cache_file`, `ttl`).
    func expireCacheFiles() {
        guard let ttl = configuration.cacheTTL, ttl > 0 else { return }
        let cutoff = ageing.now(clock).addingTimeInterval(-ttl)
        let expired = byID.values.filter {
            $0.state == .completed && $0.storage == .cache && !$0.lifecycle.moving && $0.lastAccess <= cutoff
        }
        for record in expired.sorted(by: { $0.lastAccess < $1.lastAccess }) {
            // The purge is told first, then the removal (the story reads as the README says).
            notePurge(PurgeEvent(kind: .cacheFile, reason: .ttl, id: record.id, url: record.shownURL, bytes: record.size ?? 0))
            removeRecord(record, by: .retention)
        }
    }

    /// Checks retention every half of the allowed lateness (`RetentionSchedule`), on the scheduler.
    func scheduleRetention() {
        guard let ttl = configuration.cacheTTL, ttl > 0 else { return }
        scheduler.schedule(after: RetentionSchedule.checkInterval(ttl: ttl)) { [weak self] in
            guard let self else { return }
            let stop: Bool = self.decide {
                guard !self.shuttingDown else { return true }
                self.expireCacheFiles()
                return false
            }
            if !stop { self.scheduleRetention() }
        }
    }
}

/// When retention looks: a file is purged within the TTL plus the larger of 1 s and a tenth of
/// the TTL, so the check runs every half of that. Pure.
enum RetentionSchedule {
    static func allowedLateness(ttl: Double) -> Double { max(1, ttl / 10) }

    static func checkInterval(ttl: Double) -> Double { allowedLateness(ttl: ttl) / 2 }
}
