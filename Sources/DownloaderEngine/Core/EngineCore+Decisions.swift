import Foundation

// Where every change of a download's life is decided: its lifecycle takes the event, and what it
// returns is applied here in order. Under `lock`.
extension EngineCore {
    /// `record`'s lifecycle decides on `event`; its actions are applied in order. `local` applies the
    /// actions that need the event's own data (a head, a checkpoint's length, a settled partial) and
    /// returns true for each one it took.
    func handle(_ event: LifecycleEvent, for record: DownloadRecord, local: (LifecycleAction) -> Bool = { _ in false }) {
        let context = DownloadLifecycle.Context(maxAttempts: retryPolicy.maxAttempts, shuttingDown: shuttingDown,
                                                maxSpaceWaits: maxSpaceWaits)
        let actions = record.lifecycle.handle(event, context)
        indexFailed(record)
        for action in actions where !local(action) {
            apply(action, to: record)
        }
        if cluster != nil { clusterCheck(record) }
    }

    /// Keeps `failedRecords` in step with `record`'s state (after its lifecycle decided, or a restore).
    func indexFailed(_ record: DownloadRecord) {
        if record.state == .failed {
            if failedRecords[record.id] == nil { failedRecords[record.id] = record }
        } else if !failedRecords.isEmpty {
            failedRecords[record.id] = nil
        }
    }

    /// Applies actions decided outside `handle` (a new download's first ones).
    func handle(_ actions: [LifecycleAction], for record: DownloadRecord) {
        for action in actions { apply(action, to: record) }
        if cluster != nil { clusterCheck(record) }
    }

    private func apply(_ action: LifecycleAction, to record: DownloadRecord) {
        switch action {
        case .requestSlot:
            let granted = slots.request(record.id, client: record.clientGroup)
            stats.activeTransfers = slots.active
            if granted { handle(.slotGranted, for: record) }
        case .leaveQueue:
            slots.leave(record.id)
        case .releaseSlot:
            let next = slots.release(record.id, granting: !shuttingDown)
            stats.activeTransfers = slots.active
            if let next, let nextRecord = byID[next] { handle(.slotGranted, for: nextRecord) }
        case .startAttempt(let serial):
            startAttempt(record, serial: serial)
        case .cancelTransfer(let serial):
            if let handle = record.attempt(serial)?.handle { effects.append { handle.cancel() } }
        case .scheduleRetry(let token, let attemptsMade, let retryAfter):
            scheduleRetry(record, token: token, attemptsMade: attemptsMade, retryAfter: retryAfter)
        case .discardPartial:
            discardPartial(record)
            refreshTailOnRestart(record)
        case .forgetValidator:
            record.restartPending = record.restartPending || record.partialBytes > 0
            record.validator = nil
            record.expectedTotal = nil
            refreshTailOnRestart(record)
        case .recordFailure(let failure):
            record.publishing = nil
            record.restartPending = false  // A later request starts afresh: no restart to tell.
            record.error = failure
            record.updatedAt = clock.now()
        case .clearFailure:
            // A failed download starting again: its readers (a `/fetch` asking again) see it waiting, not failed.
            record.error = nil
            refreshTail(record)
        case .resetResult:
            // A completed download whose file vanished: its readers see it waiting, not completed.
            resetResult(record)
            refreshTail(record)
        case .moveFile:
            moveFile(record)
        case .emit(let notice):
            emit(notice, of: record)
        case .journal:
            save(record)
        case .housekeeping(.boundEmptyPaused):
            boundEmptyPaused(pausing: record)
        case .housekeeping(.purgeCache):
            purgeCache()
        case .housekeeping(.forgetOldFailures):
            forgetOldFailures()
        case .acceptBody, .refuseBody, .abortUnwanted, .keepDurableOffset, .settle, .closeStaleAttempt,
             .keepSettledPartial, .recordPublishing, .recordCompletion:
            assertionFailure("\(action) needs its event's data: it is applied where the event is handled")
        }
    }

    private func emit(_ notice: LifecycleNotice, of record: DownloadRecord) {
        refreshTail(record)
        let snapshot = record.snapshot()
        switch notice {
        case .resumed:
            let offset = record.attempt?.acceptedOffset ?? 0
            publish(.resumed(offset: offset, restarted: record.attempt?.restarts(at: offset) ?? false, snapshot), of: record)
        case .paused: publish(.paused(snapshot), of: record)
        case .queued: publish(.progress(snapshot), of: record)
        case .completed:
            stats.completions += 1
            publish(.completed(snapshot), of: record)
        case .failed:
            stats.failures[record.error?.code ?? .unknown, default: 0] += 1
            publish(.failed(snapshot), of: record)
        }
        tellNotice(notice, of: record)
    }

    /// A download that goes on after dropping its version (a restart): readers joining now wait for
    /// the next version's head, and none is told the old one's validator or length. (A failing
    /// download's readers hear its failure from `recordFailure`, which comes after these actions:
    /// told now, they would read a failure without its code.)
    private func refreshTailOnRestart(_ record: DownloadRecord) {
        guard record.state != .failed && record.state != .completed else { return }
        refreshTail(record)
    }

    /// A completed download whose file vanished starts over under the same id: what it had is forgotten.
    private func resetResult(_ record: DownloadRecord) {
        unindexCompleted(record)
        record.finalPath = nil
        record.sha256 = nil
        record.size = nil
        record.keptBytes = 0
        record.durableOffset = 0
        record.keptHash = nil
        record.bytesWritten = 0
        record.validator = nil
        record.expectedTotal = nil
    }

    /// Drops the kept bytes. The partial's name is set aside (the same download reuses it) before any
    /// later decision's effect can open it again, and the file deleted on the work queue, so nobody
    /// waits for the file system to free a large file's blocks.
    func discardPartial(_ record: DownloadRecord) {
        let path = partialPath(of: record)
        let aside = asideName(for: path)
        let before = hooks.beforeRemove
        let freed = (bytes: record.partialBytes, area: FreeingBytes.Area.partials)
        freeing.add(freed.bytes, in: freed.area)
        effects.append { [self] in
            if rename(path, aside) == 0 {
                deleteInBackground(aside, before: before, freeing: freed)
                return
            } else if errno != ENOENT {
                FileStore.remove(path)
            }
            freeing.done(freed.bytes, in: freed.area)
        }
        if record.keptBytes > 0 || record.durableOffset > 0 || record.segments != nil { record.droppedBytesUncommitted = true }
        record.keptBytes = 0
        record.durableOffset = 0
        record.keptHash = nil
        record.segments = nil
        record.bytesWritten = 0
    }

    /// Under `lock`: a fresh name beside `path` for a file set aside until it is deleted.
    func asideName(for path: String) -> String {
        path + ".\(makeSerial())" + FileStore.trashSuffix
    }

    /// Under `lock`: deletes `path` on the work queue once the lock is released (the name must not be
    /// reused before then). `freeing`: the bytes it frees, counted as free until it is deleted.
    func removeLater(_ path: String, freeing freed: (bytes: Int64, area: FreeingBytes.Area)? = nil) {
        let before = hooks.beforeRemove
        if let freed { freeing.add(freed.bytes, in: freed.area) }
        effects.append { [self] in deleteInBackground(path, before: before, freeing: freed) }
    }

    /// Deletes `path` on the work queue (`before`: the test hook `beforeRemove`); `freeing`: bytes
    /// counted in `freeing` when it was decided, uncounted once it is done.
    func deleteInBackground(_ path: String, before: (@Sendable () -> Void)?,
                            freeing freed: (bytes: Int64, area: FreeingBytes.Area)? = nil) {
        workQueue.async { [freeing] in
            before?()
            FileStore.remove(path)
            if let freed { freeing.done(freed.bytes, in: freed.area) }
        }
    }
}
