import Foundation
import Glibc

// Loading the state at start-up.
extension EngineCore {
    /// What start-up found, for logs and tests.
    struct RecoveryReport: Sendable, Equatable {
        var loaded = 0
        var resumed = 0
        var dropped = 0
        /// Downloads whose verified file was being renamed into place at the crash: now completed.
        var published = 0
        /// What became of an earlier release's `journal.json`.
        var journal = JournalImport.Outcome.none
        /// A damaged state database, kept aside at this start (the engine started with an empty one).
        var damagedStateKeptAt: String?
        /// Why it was found damaged (the integrity check's answer).
        var stateDamage: String?
        /// Damaged databases kept from earlier starts: no file was swept.
        var damagedStatesKeptEarlier: [String] = []
    }

    /// Restores downloads from the state store (first importing an earlier release's journal, once):
    /// partials are cut back to their stored (durable) offset; `downloading`/`queued` ones carry on
    /// by themselves for their stored callers (whose tokens keep working; without any — only
    /// streaming readers, which are not stored — they are paused, bytes kept); `paused` stay paused;
    /// `completed` whose file vanished are dropped. Partials that no download owns are deleted. Runs
    /// before anything else uses the engine (file system work under the lock is fine here).
    func recover() throws -> RecoveryReport {
        var report = RecoveryReport()
        report.damagedStateKeptAt = stateDamage.keptAt
        report.stateDamage = stateDamage.reason
        report.damagedStatesKeptEarlier = stateDamage.kept.filter { $0 != stateDamage.keptAt }
        // Cluster mode loads nothing: downloads come into memory when their lease is taken (a
        // request, or a takeover of a lapsed lease); nothing is swept that another replica may hold.
        guard cluster == nil else { return report }
        let directory = store.stateDirectory
        // The cache and data areas are listed on the work queue while the store opens its rows.
        let (cacheDirectory, dataDirectory) = (store.cacheDirectory, store.dataDirectory)
        let listings = Background(on: workQueue) { StoredFiles(cache: AreaListing(cacheDirectory), data: AreaListing(dataDirectory)) }
        // The rows are read, and made records, on the writer thread while this one restores them.
        let (tau, interval, ignoring) = (configuration.rateTimeConstant, configuration.progressInterval, configuration.coalesceIgnoreQuery)
        let (key, limit) = (credentialKey, connectionLimit)
        let loading = StartupLoad(writer: stateWriter, directory: directory, credential: { key.hash($0.canonicalBytes) }) { entry in
            let record = DownloadRecord(stored: entry, tau: tau, progressInterval: interval, ignoring: ignoring)
            record.restoreGranted(limit: limit)
            return record
        }
        let prologue: StartupLoad.Prologue
        do throws(StateStoreError) {
            prologue = try loading.waitForPrologue()
        } catch {
            _ = listings.wait()
            throw error
        }
        var files = listings.wait()
        if let failure = files.failure {
            while (try? loading.next()) != nil {}  // The read runs out (on the state writer's thread).
            throw failure
        }
        report.journal = prologue.journal
        try decide { () throws(StateStoreError) in
            bury(prologue.tombstones)
            try restore(loading, files: &files, into: &report)
        }
        return report
    }

    /// What changes here is saved: downloads dropped or skipped (removed from the store), published
    /// or cut back; those restored unchanged are not written again. The batches come in as they are
    /// read (`StartupLoad`); the sweeps (orphan partials, unclaimed cache files) wait for the last,
    /// and a read that fails leaves them undone (it throws: the engine does not start).
    /// Completed files are checked in the listings of their areas (one directory pass per area, not
    /// a stat per file).
    private func restore(_ loading: StartupLoad, files: inout StoredFiles, into report: inout RecoveryReport) throws(StateStoreError) {
        var (misplaced, queued, paused): ([DownloadRecord], [DownloadRecord], [DownloadRecord]) = ([], [], [])
        while let batch = try loading.next() {
            if byID.isEmpty {
                byID.reserveCapacity(batch.total)
                byURL.reserveCapacity(batch.total)
            }
            for id in batch.buried { unsaved.insert(id) }
            for record in batch.records {
                restore(record, files: &files, misplaced: &misplaced, queued: &queued, paused: &paused, into: &report)
            }
        }
        // These forget failed and paused downloads only: `misplaced` and `queued` stay current.
        forgetOldFailures()
        expireIdle(restored: paused)
        purgeCache()  // A budget lowered since the last run holds from the start.
        removeSetAsidePartials()
        // Not while a journal's downloads could not be imported, nor while a damaged database is
        // kept (it may be salvaged): the files of what they hold would look like orphans.
        if !report.journal.leftSomethingOut && stateDamage.kept.isEmpty {
            removeOrphanPartials()
            // Cache files named like ours that no completed download claimed: left by a crash between
            // publishing and committing. The data area is never swept, but for copies a crash cut short.
            files.cache.removeUnclaimed()
            files.data.removeUnclaimed(endingWith: FileStore.copySuffix)
        }
        // A move into the data area that a crash interrupted starts again.
        for record in misplaced { placeFile(record) }
        // Running ones carry on for their callers, oldest first; with none stored, paused (and saved so).
        for record in queued.sorted(by: { $0.createdAt < $1.createdAt }) {
            // A credentialed download's headers were never stored: it waits for a caller who brings them.
            if record.waitsForCredentials { record.story.pauseReason = .credentialsRequired }
            handle(.recovered(callers: record.waitsForCredentials ? 0 : record.tokens.count), for: record)
            tellRecovered(record)
            if record.state == .paused { save(record) } else { report.resumed += 1 }
        }
    }

    /// A completed file's path that names an area's directory another way is spelled as the area
    /// is now (`StoredFiles.spelledInArea`): true when it changed.
    private func respell(_ record: DownloadRecord, _ files: inout StoredFiles) -> Bool {
        guard let path = record.finalPath, let spelled = files.spelledInArea(path) else { return false }
        record.finalPath = spelled
        return true
    }

    /// One stored download back in memory, in the order they were stored (the first of a duplicate
    /// id is kept).
    private func restore(_ record: DownloadRecord, files: inout StoredFiles, misplaced: inout [DownloadRecord],
                         queued: inout [DownloadRecord], paused: inout [DownloadRecord], into report: inout RecoveryReport) {
        // Inserted first (one hash lookup each); a duplicate is taken out again, the first kept.
        if let first = byID.updateValue(record, forKey: record.id) {
            byID[record.id] = first
            unsaved.insert(record.id)
            return
        }
        switch record.state {
        case .completed:
            let respelled = respell(record, &files)
            guard let path = record.finalPath, files.claim(path, of: record.id) else {
                report.dropped += 1
                byID[record.id] = nil
                save(record)  // Not kept: removed from the store.
                return
            }
            if respelled { save(record) }
        case .paused, .failed, .queued, .downloading:
            let storedOffset = record.keptBytes
            if adoptPublished(record) {
                _ = respell(record, &files)
                _ = record.finalPath.map { files.claim($0, of: record.id) }  // Claimed: not an orphan.
                report.published += 1
                save(record)
            } else if restorePartial(record) != storedOffset {
                save(record)
            }
        }
        index(record)
        for token in record.tokens { tokens[token] = record.id }
        // Failed and completed ones are indexed, by insertion only: a restored record was never in
        // an index (no removal attempt per record, 7 % of a 100 000-download start-up).
        switch record.state {
        case .failed: failedRecords[record.id] = record
        case .completed where !isPlaced(record):
            indexCompleted(record)
            misplaced.append(record)
        case .queued: queued.append(record)
        case .paused: paused.append(record)
        case .completed: indexCompleted(record)
        case .downloading: break
        }
        report.loaded += 1
    }

    /// Makes `record` the one new callers of its coalescing key join, unless one restored before it
    /// serves them better. Downloads that came to share a key (`coalesceIgnoreQuery` turned on over
    /// stored ones) all stay, with their ids, callers and files; only the best is joined.
    private func index(_ record: DownloadRecord) {
        guard let indexed = byURL.updateValue(record, forKey: record.key) else { return }
        sharedKeys.insert(record.key)
        if !Self.joinable(record.state, record.partialBytes, before: indexed.state, indexed.partialBytes) {
            byURL[record.key] = indexed
        }
    }

    /// Which of two downloads sharing a key new callers join: a completed one, else one not failed,
    /// else the one with more bytes kept (a tie keeps the first).
    static func joinable(_ state: DownloadState, _ bytes: Int64, before other: DownloadState, _ otherBytes: Int64) -> Bool {
        func rank(_ state: DownloadState) -> Int { state == .completed ? 2 : state == .failed ? 0 : 1 }
        return (rank(state), bytes) > (rank(other), otherBytes)
    }

    /// Whether a completed download's file is where its storage class keeps it (no move to start).
    private func isPlaced(_ record: DownloadRecord) -> Bool {
        guard let path = record.finalPath, let name = record.fileName else { return true }  // Nothing to move.
        return store.isFinalPath(path, id: record.id, fileName: name, storage: record.storage)
    }

    /// Tombstoned downloads never come back: a row a tombstone names is dropped (`StartupLoad`
    /// hands over its id; it is removed from the store), and the files the tombstone lists are
    /// deleted (a crash may have come first).
    private func bury(_ removed: [Tombstone]) {
        for tombstone in removed {
            tombstones.add(tombstone)
            for path in tombstone.paths { FileStore.remove(path) }
        }
    }

    /// A stored publishing intent (a not-yet-completed download with `finalPath`, `sha256` and `size`:
    /// the partial was verified and fsynced before it was committed) whose file is at its final path,
    /// or still whole in the partial (renamed now), makes the download completed.
    private func adoptPublished(_ record: DownloadRecord) -> Bool {
        guard let path = record.finalPath, let sha = record.sha256, let size = record.size else { return false }
        record.finalPath = nil
        record.sha256 = nil
        record.size = nil
        if FileStore.fileSize(path) != size {
            let partial = store.partialPath(id: record.id)
            guard FileStore.fileSize(partial) == size, (try? store.publish(from: partial, to: path)) != nil else { return false }
        }
        record.setCompleted(path: path, sha256: sha, size: size)
        record.lifecycle = DownloadLifecycle(restoring: .completed)
        return true
    }

    /// Cuts the partial back to the stored offset (a tail past it may be garbage after a crash).
    /// Returns the bytes kept.
    @discardableResult
    private func restorePartial(_ record: DownloadRecord) -> Int64 {
        let path = store.partialPath(id: record.id)
        let onDisk = FileStore.fileSize(path) ?? 0
        var keep = min(record.keptBytes, onDisk)
        if record.validator == nil { keep = 0 }
        // Pieces are kept also when the prefix kept nothing (`startAttempt` resumes them).
        let segmented = (keep > 0 || (record.segments?.writtenBytes ?? 0) > 0) && restoreSegments(record, onDisk: onDisk)
        if keep == 0 && !segmented {
            FileStore.remove(path)
        } else if onDisk != keep && !segmented {
            if truncate(path, off_t(keep)) != 0 { keep = 0; FileStore.remove(path) }
        }
        record.keptBytes = keep
        record.durableOffset = keep
        record.bytesWritten = max(keep, record.segments?.writtenBytes ?? 0)
        return keep
    }

    /// Partials set aside for deletion before a crash (`….trash`): decided, so swept at every start,
    /// also while a damaged database is kept (nothing it could salvage is in them).
    private func removeSetAsidePartials() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: store.partialDirectory) else { return }
        for name in names where name.hasSuffix(FileStore.trashSuffix) {
            FileStore.remove(store.partialDirectory + "/" + name)
        }
    }

    private func removeOrphanPartials() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: store.partialDirectory) else { return }
        for name in names where name.hasSuffix(".part") {
            let id = String(name.dropLast(5))
            if byID[id] == nil || byID[id]?.state == .completed { FileStore.remove(store.partialDirectory + "/" + name) }
        }
    }
}
