import Foundation

// Ends of downloads, events, the journal, forgetting and shutdown. Under `lock` unless noted.
extension EngineCore {
    func complete(_ record: DownloadRecord, path: String, sha256: String, size: Int64, storage: StorageClass) {
        let now = clock.now()
        record.publishing = nil
        record.setCompleted(path: path, sha256: sha256, size: size)
        record.attemptsMade = 0
        record.startAfterDrain = false
        record.lastAccess = now
        record.updatedAt = now
        record.systemHold = false
        // Promoted to persistent while running: the file moves on the work queue, served meanwhile.
        if record.storage != storage { scheduleMove(record) }
        releaseSlot(record)
        emit(record, .completed(record.snapshot()))
        purgeCache()
        saveJournal()
    }

    func fail(_ record: DownloadRecord, _ failure: DownloadFailure) {
        record.retryTimer?.cancel()
        record.retryTimer = nil
        record.error = failure
        record.state = .failed
        record.attemptsMade = 0
        record.startAfterDrain = false
        record.systemHold = false
        record.updatedAt = clock.now()
        releaseSlot(record)
        emit(record, .failed(record.snapshot()))
        forgetOldFailures()
        saveJournal()
    }

    func emit(_ record: DownloadRecord, _ event: DownloadEvent) {
        subscribers.publish(event, to: record.id)
    }

    /// Tells the journal writer that the state changed (never waits for disk; the writer takes its
    /// snapshot under the lock when it starts writing, at most every `journalMinInterval`).
    func saveJournal() {
        journalGeneration += 1
        journalWriter.markDirty()
    }

    /// Bounds the failed downloads kept (in memory and in the journal): those failed longer than
    /// `failedRetention` ago go, then the oldest beyond `maxFailedDownloads`, with their partials.
    func forgetOldFailures() {
        let failed = byID.values.filter { $0.state == .failed && $0.attempt == nil }
        let cutoff = clock.now().addingTimeInterval(-max(0, configuration.failedRetention))
        let limit = max(1, configuration.maxFailedDownloads)
        guard failed.count > limit || failed.contains(where: { $0.updatedAt < cutoff }) else { return }
        var kept = failed.count
        for record in failed.sorted(by: { $0.updatedAt < $1.updatedAt }) where kept > limit || record.updatedAt < cutoff {
            kept -= 1
            discardPartial(record)
            forget(record)
        }
    }

    /// Removes a download entirely (its tokens stop working).
    func forget(_ record: DownloadRecord) {
        byID[record.id] = nil
        if byURL[record.url] === record { byURL[record.url] = nil }
        for token in record.tokens { tokens[token] = nil }
        record.tokens.removeAll()
    }

    func resumeShutdownIfDrained() {
        guard shuttingDown, !byID.values.contains(where: { $0.attempt != nil }) else { return }
        let waiter = shutdownWaiter
        shutdownWaiter = nil
        waiter?.resume()
    }

    // MARK: Queries

    /// A snapshot whose rate has decayed over any quiet time since the last byte.
    func freshSnapshot(_ record: DownloadRecord) -> DownloadSnapshot {
        if record.isTransferring { record.rate.tick(at: clock.monotonic()) }
        return record.snapshot()
    }

    func snapshot(id: String) -> DownloadSnapshot? { locked { byID[id].map(freshSnapshot) } }

    func list() -> [DownloadSnapshot] {
        locked { byID.values.map(freshSnapshot) }
            .sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id > $1.id }
    }

    func completedFile(id: String) -> CompletedFile? {
        let file: CompletedFile? = locked {
            guard let record = byID[id], record.state == .completed, let path = record.finalPath,
                  let sha = record.sha256, let size = record.size else { return nil }
            record.lastAccess = clock.now()
            return CompletedFile(path: path, fileName: record.fileName ?? FileNameSanitizer.fallback, size: size, sha256: sha)
        }
        // The stat runs without the lock.
        guard let file, FileStore.fileSize(file.path) == file.size else { return nil }
        return file
    }

    var statistics: EngineStatistics {
        var s = locked { stats }
        s.subscribers = subscribers.count
        return s
    }

    /// The subscription's first element is the current progress, or the terminal event of an ended download.
    func subscribe(id: String) -> SubscriberQueue? {
        locked {
            guard let record = byID[id] else { return nil }
            let queue = subscribers.makeQueue(for: id)
            if shuttingDown {
                queue.finish()
                return queue
            }
            let snapshot = freshSnapshot(record)
            switch record.state {
            case .completed: queue.push(.completed(snapshot))
            case .failed: queue.push(.failed(snapshot))
            default: queue.push(.progress(snapshot))
            }
            return queue
        }
    }

    // MARK: Shutdown

    /// Stops every transfer, keeps the partials (journaled as still running), ends subscriptions.
    func shutdown() async {
        let (handles, alreadyDown): ([TransferHandle], Bool) = locked {
            if shuttingDown { return ([], true) }
            shuttingDown = true
            var handles: [TransferHandle] = []
            for record in byID.values {
                record.retryTimer?.cancel()
                record.retryTimer = nil
                if let attempt = record.attempt {
                    attempt.abandoned = true
                    if let handle = attempt.handle { handles.append(handle) }
                }
            }
            waiting.removeAll()
            return (handles, false)
        }
        for queue in subscribers.all() { queue.finish() }
        guard !alreadyDown else { return }
        handles.forEach { $0.cancel() }
        // Bounded: a driver that never reports back does not hold shutdown forever.
        scheduler.schedule(after: 10) { [weak self] in
            guard let self else { return }
            let waiter: CheckedContinuation<Void, Never>? = self.locked {
                defer { self.shutdownWaiter = nil }
                return self.shutdownWaiter
            }
            waiter?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let drained: Bool = locked {
                if byID.values.contains(where: { $0.attempt != nil }) {
                    shutdownWaiter = continuation
                    return false
                }
                return true
            }
            if drained { continuation.resume() }
        }
        locked { saveJournal() }
        journalWriter.flush()
    }
}
