import Foundation
import Glibc

// Loading the journal at start-up.
extension EngineCore {
    /// What start-up found, for logs and tests.
    struct RecoveryReport: Sendable, Equatable {
        var loaded = 0
        var resumed = 0
        var dropped = 0
        /// Downloads whose verified file was being renamed into place at the crash: now completed.
        var published = 0
        var corruptJournalKeptAt: String?
    }

    /// Restores downloads from the journal: partials are cut back to their journaled (durable)
    /// offset; `downloading`/`queued` ones carry on by themselves for their journaled callers (whose
    /// tokens keep working; without any — only streaming readers, which are not journaled — they are
    /// paused, bytes kept); `paused` stay
    /// paused; `completed` whose file vanished are dropped. Partials that no entry owns are deleted.
    /// Runs before anything else uses the engine (file system work under the lock is fine here).
    func recover() -> RecoveryReport {
        var report = RecoveryReport()
        let journal = StateJournal(directory: store.stateDirectory)
        var entries: [JournalEntry] = []
        switch journal.load() {
        case .empty: break
        case .loaded(let loaded): entries = loaded
        case .corrupt(let preserved): report.corruptJournalKeptAt = preserved
        }
        return decide {
            restore(entries, into: &report)
            return report
        }
    }

    private func restore(_ entries: [JournalEntry], into report: inout RecoveryReport) {
        for entry in entries where byID[entry.id] == nil && byURL[entry.url] == nil {
            let record = DownloadRecord(entry: entry, tau: configuration.rateTimeConstant,
                                        progressInterval: configuration.progressInterval)
            switch entry.state {
            case .completed:
                guard let path = entry.finalPath, FileStore.fileSize(path) != nil else {
                    report.dropped += 1
                    continue
                }
            case .paused, .failed, .queued, .downloading:
                if adoptPublished(record) {
                    report.published += 1
                } else {
                    restorePartial(record)
                }
            }
            byID[record.id] = record
            byURL[record.url] = record
            for token in record.tokens { tokens[token] = record.id }
            report.loaded += 1
        }
        forgetOldFailures()
        expireIdle()
        removeOrphanPartials()
        removeOrphanCacheFiles()
        // A move into the data area that a crash interrupted starts again.
        for record in byID.values where record.state == .completed { placeFile(record) }
        // Running ones carry on for their callers, oldest first; with none journaled, paused.
        let carryOn = byID.values.filter { $0.state == .queued }.sorted { $0.createdAt < $1.createdAt }
        for record in carryOn {
            handle(.recovered(callers: record.tokens.count), for: record)
            if record.state != .paused { report.resumed += 1 }
        }
        saveJournal()
    }

    /// A journaled publishing intent (a not-yet-completed entry with `finalPath`, `sha256` and `size`:
    /// the partial was verified and fsynced before it was journaled) whose file is at its final path,
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

    /// Cuts the partial back to the journaled offset (a tail past it may be garbage after a crash).
    private func restorePartial(_ record: DownloadRecord) {
        let path = store.partialPath(id: record.id)
        let onDisk = FileStore.fileSize(path) ?? 0
        var keep = min(record.keptBytes, onDisk)
        if record.validator == nil { keep = 0 }
        if keep == 0 {
            FileStore.remove(path)
        } else if onDisk != keep {
            if truncate(path, off_t(keep)) != 0 { keep = 0; FileStore.remove(path) }
        }
        record.keptBytes = keep
        record.durableOffset = keep
        record.bytesWritten = keep
    }

    /// Cache files named like ours (`<16 hex id>-name`) that no completed download owns: left by a
    /// crash between publishing and journaling. The data area is never swept.
    private func removeOrphanCacheFiles() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: store.cacheDirectory) else { return }
        let owned = Set(byID.values.compactMap { $0.state == .completed ? $0.finalPath : nil })
        for name in names {
            let id = name.prefix(16)
            guard name.count > 17, name.dropFirst(16).first == "-",
                  id.allSatisfy({ "0123456789abcdef".contains($0) }) else { continue }
            let path = store.cacheDirectory + "/" + name
            if !owned.contains(path) { FileStore.remove(path) }
        }
    }

    private func removeOrphanPartials() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: store.partialDirectory) else { return }
        for name in names where name.hasSuffix(FileStore.trashSuffix) {
            FileStore.remove(store.partialDirectory + "/" + name)  // Set aside for deletion before a crash.
        }
        for name in names where name.hasSuffix(".part") {
            let id = String(name.dropLast(5))
            if byID[id] == nil || byID[id]?.state == .completed { FileStore.remove(store.partialDirectory + "/" + name) }
        }
    }
}
