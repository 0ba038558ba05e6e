import Foundation

// Bounds on what the engine remembers of ended and idle downloads. Under `lock`.
extension EngineCore {
    /// Bounds the failed downloads kept (in memory and in the state store): those failed longer than
    /// `failedRetention` ago go, then the oldest beyond `maxFailedDownloads`, with their partials.
    func forgetOldFailures() {
        let failed = failedRecords.values.filter { $0.attempt == nil }
        let cutoff = ageing.now(clock).addingTimeInterval(-max(0, configuration.failedRetention))
        let limit = max(1, configuration.maxFailedDownloads)
        guard failed.count > limit || failed.contains(where: { $0.updatedAt < cutoff }) else { return }
        var kept = failed.count
        for record in failed.sorted(by: { $0.updatedAt < $1.updatedAt }) where kept > limit || record.updatedAt < cutoff {
            kept -= 1
            discardPartial(record)
            retire(record)
        }
    }

    /// Forgets paused downloads without kept bytes that are older than `cutoff` (callers or not, as a
    /// paused partial goes after its time-to-live), and the oldest caller-less ones beyond
    /// `maxEmptyPausedDownloads`. `among`: only these can be (start-up's restored paused ones, or
    /// those a pause looks at). The empty ones kept are remembered in `emptyPausedSeen`.
    func boundEmptyPaused(olderThan cutoff: Date? = nil, among candidates: [DownloadRecord]? = nil) {
        let isEmpty: (DownloadRecord) -> Bool = {
            $0.state == .paused && $0.attempt == nil && $0.partialBytes == 0 && $0.readers == 0
                && !$0.lifecycle.held  // The operator's hold is kept until the operator lifts it.
        }
        let expired: (DownloadRecord) -> Bool = { record in cutoff.map { record.updatedAt < $0 } ?? false }
        let empty = candidates?.filter(isEmpty) ?? byID.values.filter(isEmpty)
        emptyPausedSeen = Set(empty.map(\.id))
        let limit = max(0, configuration.maxEmptyPausedDownloads)
        var spare = empty.count { $0.tokens.isEmpty }  // Beyond the bound: forgotten, oldest first.
        guard spare > limit || empty.contains(where: expired) else { return }
        for record in empty.sorted(by: { $0.updatedAt < $1.updatedAt }) {
            let callerless = record.tokens.isEmpty
            guard expired(record) || (callerless && spare > limit) else { continue }
            if callerless { spare -= 1 }
            discardPartial(record)  // The empty `.part` every attempt creates (or bytes a failed sync left uncounted).
            retire(record)
            emptyPausedSeen.remove(record.id)
        }
    }

    /// After `record` paused: the bound over it and the empty paused downloads seen so far, not a
    /// pass over every download (with 100 000 downloads, that pass held the engine's lock for
    /// every pause). `record` stays seen while it settles (its attempt ends after the pause): the
    /// next pause counts it. Those that emptied otherwise (a purged partial) are found by the pass
    /// of the pressure tick (`expireIdle`, every `pressureInterval`).
    func boundEmptyPaused(pausing record: DownloadRecord) {
        emptyPausedSeen.insert(record.id)
        boundEmptyPaused(among: emptyPausedSeen.compactMap { byID[$0] })
        if byID[record.id] === record { emptyPausedSeen.insert(record.id) }
    }

    /// Forgets `record` by a bound, a time-to-live or a purge (not the operator's removal): its
    /// watchers (`/events`, its progress streams) hear it `removed` by retention, as in cluster mode,
    /// instead of keeping a download the service no longer has.
    func retire(_ record: DownloadRecord) {
        var snapshot = freshSnapshot(record)
        snapshot.pausedBy = nil  // Gone, not paused.
        publish(.removed(by: .retention, snapshot), of: record)
        forget(record)
    }

    /// Takes `record` out of the coalescing index. Of downloads that came to share its key at
    /// start-up (`EngineCore.index`), the one new callers should join takes its place.
    func unindex(_ record: DownloadRecord) {
        guard byURL[record.key] === record else { return }
        byURL[record.key] = nil
        guard sharedKeys.contains(record.key) else { return }
        let siblings = byID.values.filter { $0 !== record && $0.key == record.key }
        byURL[record.key] = siblings.max { Self.joinable($1.state, $1.partialBytes, before: $0.state, $0.partialBytes) }
        if siblings.count <= 1 { sharedKeys.remove(record.key) }
    }

    /// Removes a download entirely (its tokens stop working; the state store removes it too).
    func forget(_ record: DownloadRecord) {
        save(record)
        clusterForget(record)
        failedRecords[record.id] = nil
        unindexCompleted(record)
        byID[record.id] = nil
        unindex(record)
        for token in record.tokens { tokens[token] = nil }
        record.tokens.removeAll()
        slots.leave(record.id)
        resumeShutdownIfDrained()  // Its attempt, if any, no longer holds the shutdown back.
    }
}
