import Foundation

// What callers read: snapshots, lists, stored files, statistics and subscriptions.
extension EngineCore {
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

    /// A page of `list()`: at most `limit` downloads after `position` (nil: from the newest), those
    /// in `state` when given, the private ones only when `includingPrivate`. One pass under the lock
    /// that compares positions and makes snapshots of the page alone (`list()` makes one of every
    /// download: with 100 000 downloads a page of 10 took 0.27-0.30 s, and a `GET /downloads/{id}`
    /// beside two callers paging 0.4-0.5 s; now 0.02 s and 0.02-0.04 s).
    func page(state: DownloadState?, after position: ListPosition?, limit: Int, includingPrivate: Bool) -> [DownloadSnapshot] {
        locked {
            var top = ListTop<DownloadRecord>(limit: limit)
            for record in byID.values where (state == nil || record.state == state) && (includingPrivate || !record.isCredentialed) {
                let at = ListPosition(micros: ListPosition.micros(record.createdAt), id: record.id)
                if let position, !position.precedes(at) { continue }
                top.offer(at, record)
            }
            return top.items.map(freshSnapshot)
        }
    }

    /// How many downloads are in each state and how many wait for disk space (one pass, without
    /// building snapshots: `/metrics`), and, when `withIDs` (cluster mode), which ids were counted.
    func stateCounts(withIDs: Bool) -> (counts: [DownloadState: Int], waitingForSpace: Int, ids: [String]) {
        locked {
            var counts: [DownloadState: Int] = [:]
            var waiting = 0
            for record in byID.values {
                counts[record.state, default: 0] += 1
                if record.lifecycle.waitsForSpace { waiting += 1 }
            }
            return (counts, waiting, withIDs ? Array(byID.keys) : [])
        }
    }

    func completedFile(id: String) -> CompletedFile? {
        let (file, commit): (CompletedFile?, Bool) = locked {
            guard let record = byID[id], record.state == .completed, let path = record.finalPath,
                  let sha = record.sha256, let size = record.size else { return (nil, false) }
            // The access resets the retention clock, durably: a crash must not bring an earlier
            // purge. A commit follows (the writer's pace bounds them), at most once a second a file.
            let now = clock.now()
            let commit = now.timeIntervalSince(record.lastAccess) >= 1
            record.lastAccess = now
            unsaved.insert(record.id)
            return (CompletedFile(path: path, fileName: record.fileName ?? FileNameSanitizer.fallback, size: size, sha256: sha,
                                  contentType: record.contentType, originETag: record.validator?.etag,
                                  originLastModified: record.validator?.lastModified), commit)
        }
        if commit { stateWriter.markDirty() }
        // The stat runs without the lock.
        guard let file, FileStore.fileSize(file.path) == file.size else {
            if let file, FileStore.isSurelyNot(file.path, size: file.size) { completedFileGone(id: id, path: file.path) }
            return nil
        }
        return file
    }

    /// A completed download's file is gone, or no longer its size (deleted or changed outside the
    /// service): the download fails (`disk_error`), so that its callers stop waiting for a file that
    /// will not be served and the next request of its URL fetches it anew.
    private func completedFileGone(id: String, path: String) {
        decide {
            guard let record = byID[id], record.finalPath == path else { return }
            completedFileChanged(record)
        }
    }

    /// Under `lock`: the completed file of `record` is gone or changed on disk: the download fails
    /// (`disk_error`), stored so. Not while it moves to another area (its old name goes before the
    /// new one is recorded).
    func completedFileChanged(_ record: DownloadRecord) {
        guard record.state == .completed, !record.lifecycle.moving else { return }
        // Set first: its readers are told the failure as the lifecycle's actions apply.
        record.error = DownloadFailure(code: .diskError, message: "the completed file is gone or changed on disk (outside the service); "
                                       + "ask for the URL again to fetch it anew")
        handle(.fileVanished, for: record)
        record.updatedAt = clock.now()
        save(record)
    }

    var statistics: EngineStatistics {
        var s = locked { stats }
        s.subscribers = subscribers.count
        s.cluster = cluster?.statistics
        s.stateFailure = stateWriter.lastError?.description
        return s
    }

    /// The subscription's first element is the current progress, or the terminal event of an ended
    /// download; then the events decided after it (those decided before, still on their way, are
    /// reflected in that first element and skipped).
    func subscribe(id: String) -> SubscriberQueue? {
        locked {
            guard let record = byID[id] else { return nil }
            let queue = subscribers.makeQueue(for: id, after: eventSequence)
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
}
