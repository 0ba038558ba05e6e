import Basics
import Foundation

// An attempt's end: its body verified and published, or its partial synced and kept; then the
// lifecycle decides between completion, failure, retry and pause.
extension EngineCore {
    /// What settling needs to know of the download, read when the transfer ended.
    private struct SettleContext: Sendable {
        var id: String
        var sha256: String?
        var size: Int64?
        var total: Int64?
        var storage: StorageClass
        var fileName: String
        /// Cluster mode: the lease the download is held under (its file gets the epoch's name).
        var lease: LeaseHold?
    }

    /// The attempt's transfer ended (transfer thread; the work queue when it never started).
    func attemptEnded(_ attempt: Attempt, _ result: Result<TransferSummary, TransferFailure>) {
        decide {
            attempt.handle = nil  // The transfer holds the attempt as its delegate: break the cycle.
            guard let record = record(of: attempt) else {
                closeStale(attempt)
                return
            }
            handle(.transferEnded(serial: attempt.serial), for: record) { action in
                switch action {
                case .settle:
                    if let tail = record.tail { effects.append { tail.setFinishing(true) } }
                    let context = SettleContext(id: record.id, sha256: record.expectedSHA256, size: record.expectedSize,
                                                total: record.expectedTotal, storage: record.storage,
                                                fileName: record.fileName ?? FileNameSanitizer.fallback, lease: record.lease)
                    effects.append { [self] in workQueue.async { self.settle(attempt, result, context) } }
                case .closeStaleAttempt:
                    closeStale(attempt)
                default:
                    return false
                }
                return true
            }
        }
    }

    /// Under `lock`: an attempt whose download is gone or moved on closes its partial; when the
    /// download was removed, the file goes too (its preparation may have opened it, creating it
    /// again, after the removal deleted it).
    private func closeStale(_ attempt: Attempt) {
        let removed = tombstones.contains(id: attempt.recordID)
        effects.append { [workQueue] in
            workQueue.async {
                let path = attempt.partial?.path
                _ = attempt.partial?.close()
                attempt.partial = nil
                if removed, let path { FileStore.remove(path) }
            }
        }
    }

    /// Work queue, no lock: verifies and publishes a whole body, or syncs what the partial keeps (a
    /// restart discards it: no sync); then the lifecycle takes the verdict.
    private func settle(_ attempt: Attempt, _ result: Result<TransferSummary, TransferFailure>, _ context: SettleContext) {
        let partial = attempt.partial
        attempt.partial = nil
        var settlement = Settlement.notDone
        /// A sync reported an I/O error: written bytes may be lost although a later sync succeeds.
        let lostSync = locked { attempt.lostSync }
        var lostWrites = lostSync != nil
        /// This settle's own sync failed: the other connections' pieces written in place are not durable.
        var syncFailed = false
        /// The sync before publishing failed: what it was to make durable may be lost.
        var publishSyncFailed = false
        /// A checkpoint's sync found the disk full: the whole body arrived but is not durable, and
        /// the download waits for space (`SpaceWait`) with what was made durable before.
        let syncFoundNoSpace = lostSync?.error.isNoSpace == true
        if case .success = result, attempt.refusal == nil, attempt.acceptedOffset != nil, let partial, !syncFoundNoSpace {
            settlement = lostSync.map { .failed(.disk($0.error), discard: false) }
                ?? absorbSegments(attempt, partial) ?? verifyAndPublish(attempt, partial, context, syncFailed: &publishSyncFailed)
        }
        // Linux reports a failed writeback once: a later sync "succeeds" without the lost bytes, so
        // they are never resumed on (nor their hash), as after a checkpoint's failed sync.
        lostWrites = lostWrites || publishSyncFailed
        // Bytes kept for a later attempt are made durable first (not those a restart discards).
        var restarts = false
        if case .restart = attempt.refusal { restarts = true }
        if let partial, settlement.resumes, !restarts {
            do throws(SystemError) {
                try partial.sync()
                // Synced: the pieces' bytes after the prefix are durable, and may join it (the
                // second sync has nothing to write; it records the new length as durable).
                if keepContiguous(of: attempt, in: partial, trusted: lostSync == nil) { try partial.sync() }
            } catch {
                syncFailed = true
                lostWrites = lostWrites || error.errno == EIO
            }
        }
        // Durable: what this settle's sync covered, else what the attempt's checkpoints did (never
        // past the offset stored before a checkpoint's sync failed).
        let checkpointed = locked { record(of: attempt)?.durableOffset ?? 0 }
        let durable = min(max(partial?.durableLength ?? 0, checkpointed), lostSync?.durable ?? .max)
        let closed = partial?.close()
        var judged = result
        if syncFoundNoSpace, let lost = lostSync?.error { judged = .failure(TransferFailure(.disk, lost.description, code: lost.errno)) }
        var verdict = AttemptVerdict.judge(settlement, refusal: attempt.refusal, result: judged,
                                           requestedOffset: attempt.plan.offset, acceptedOffset: attempt.acceptedOffset,
                                           diskError: syncFoundNoSpace ? lostSync?.error : attempt.diskError)
        let held = lostWrites ? 0 : max(closed?.length ?? 0, attempt.crew?.table.writtenBytes ?? 0)
        decide {
            guard let record = record(of: attempt) else {
                // Removed while settling: a file published meanwhile goes too. Evicted (cluster
                // mode: its lease was lost), the file stays: the committed publishing intent names
                // it, and the replica that takes the lease over adopts it as completed.
                if case .published(let file) = settlement, cluster == nil || tombstones.contains(id: attempt.recordID) {
                    removeLater(file.path)
                }
                return
            }
            if let hold = record.lease, hold.isStopped, !settlement.isPublished {
                evictUnheld(record)  // Lost its lease meanwhile: not failed here, carried on elsewhere.
                return
            }
            // Progress counts only in bytes the next attempt resumes on: the body went on from
            // what was held (no restart) and a strong validator is known.
            if case .ended(var end) = verdict, record.validator != nil, attempt.acceptedOffset == attempt.plan.offset {
                end.progressed = held - attempt.heldAtStart >= AttemptEnd.progressBytes
                if settlement == .incomplete, held > attempt.heldAtStart {
                    // A whole answer short of the file (an origin capping its answers' length) that
                    // brought bytes: no failed attempt, and the rest is asked for at once (each time
                    // a byte further at least).
                    end.progressed = true
                    end.retryAfter = "0"
                }
                verdict = .ended(end)
            }
            let kept = closed.map { PartialFacts(keptBytes: $0.length, resumable: record.validator != nil) } ?? record.partialFacts
            record.updatedAt = clock.now()
            if attempt.crew.map({ $0.abandoned || $0.refusedConnections }) == true { record.segmentsRefused = true }
            if case .failure(let failure) = result { record.lastAttemptStalled = failure.kind == .stalled }
            noteAttemptEnded(record, attempt, verdict, judged)
            if let tail = record.tail { effects.append { tail.setFinishing(false) } }
            handle(.attemptSettled(serial: attempt.serial, verdict, partial: kept), for: record) { action in
                switch action {
                case .keepSettledPartial:
                    record.attempt = nil
                    if let closed {
                        // After an I/O error only what was made durable before is kept (the rest is fetched again).
                        let keep = lostWrites ? min(durable, closed.length) : closed.length
                        record.keptBytes = keep
                        record.keptHash = keep == closed.length ? closed.kept : nil
                        record.durableOffset = min(durable, keep)
                        record.bytesWritten = keep
                        record.flushedBytes = keep
                        keepSegments(of: attempt, record, keptPrefix: keep,
                                     synced: lostSync == nil && !syncFailed && durable >= closed.length)
                    }
                case .recordCompletion:
                    if case .published(let file) = settlement { recordCompletion(record, file) }
                default:
                    return false
                }
                return true
            }
            if shuttingDown { resumeShutdownIfDrained() }
        }
    }

    private func recordCompletion(_ record: DownloadRecord, _ file: PublishedFile) {
        let now = clock.now()
        record.setCompleted(path: file.path, sha256: file.sha256, size: file.size)
        indexCompleted(record)
        record.lastAccess = now
        record.updatedAt = now
        clusterLinger(record)
        // Promoted to persistent while running: the file moves on the work queue, served meanwhile.
        if record.storage != file.storage { placeFile(record) }
    }

    /// Checks size and SHA-256, then fsyncs and moves the file into its area (no lock held).
    /// Between the fsync and the rename the state store commits the intent (target, SHA-256, size),
    /// durably, so a crash on either side of the rename recovers the file as completed.
    private func verifyAndPublish(_ attempt: Attempt, _ partial: PartialFile, _ context: SettleContext,
                                  syncFailed: inout Bool) -> Settlement {
        let length = partial.length
        if let total = context.total, length < total { return .incomplete }
        if let total = context.total, length > total {
            return .failed(DownloadFailure(code: .sizeMismatch, message: "received \(length) bytes, the origin announced \(total)"),
                           discard: true)
        }
        let digest = partial.sha256Hex
        if let failure = Self.unmet(sha256: context.sha256, size: context.size, digest: digest, length: length) {
            return .failed(failure, discard: true)
        }
        do throws(SystemError) {
            try partial.flush()  // A write that fails (a full disk) loses nothing written before it.
        } catch {
            return .failed(.disk(error), discard: false)
        }
        do throws(SystemError) {
            try partial.fullSync(locked { hooks.publishSync })
        } catch {
            syncFailed = true
            return .failed(.disk(error), discard: false)
        }
        do {
            let target = finalPath(id: context.id, fileName: context.fileName, storage: context.storage, epoch: context.lease?.epoch)
            let (hooks, known, late): (EngineHooks, Bool, DownloadFailure?) = decide {
                guard let record = record(of: attempt) else { return (self.hooks, false, nil) }
                // A caller who joined while this attempt settled may have brought the first
                // expectations (nobody else held the download): they bind this file too.
                if let failure = Self.unmet(sha256: record.expectedSHA256, size: record.expectedSize, digest: digest, length: length) {
                    return (self.hooks, true, failure)
                }
                handle(.publishing(serial: attempt.serial), for: record) { action in
                    guard action == .recordPublishing else { return false }
                    record.publishing = PublishIntent(path: target, sha256: digest, size: length)
                    // Its readers find the file at `target` once renamed (nothing else of their view changes).
                    if let tail = record.tail { effects.append { tail.update { $0.publishingPath = target } } }
                    return true
                }
                return (self.hooks, true, nil)
            }
            // Removed meanwhile: nothing is published (the partial goes with the tombstone's files).
            guard known else { return .failed(DownloadFailure(code: .unknown, message: "the download was removed"), discard: true) }
            if let late { return .failed(late, discard: true) }
            if !stateWriter.flush() {
                // Renamed without its intent stored, a crash would lose the file (the row still
                // names the partial): nothing is renamed, and the download fails as when its
                // file could not be written.
                return .failed(Self.unrecorded(stateWriter.lastError), discard: false)
            }
            if let lease = context.lease, !lease.mayWrite(now: clock.monotonic()) {
                writeFenced(lease)  // Lost meanwhile: nothing is published.
                return .failed(DownloadFailure(code: .unknown, message: "the download's lease was lost"), discard: false)
            }
            hooks.beforePublishRename?()
            try store.publish(from: partial.path, to: target)
            hooks.afterPublishRename?()
            return .published(PublishedFile(path: target, sha256: digest, size: length, storage: context.storage))
        } catch {
            return .failed(.disk(error), discard: false)
        }
    }

    /// Work queue, settling a segmented attempt that stops short, its partial synced: the bytes
    /// its pieces wrote without a gap after the hashed prefix (the hashing stops when the attempt
    /// does) are read back and hashed, at most `SegmentCrew.keptAtSettle` of them, so that the next
    /// attempt resumes after them instead of fetching them again; never the file's last byte (a
    /// resume then still asks for a range, not for the 416 of a whole file). Not after a lost sync,
    /// nor for pieces of another version (abandoned). True when the prefix grew.
    private func keepContiguous(of attempt: Attempt, in partial: PartialFile, trusted: Bool) -> Bool {
        guard trusted, let crew = attempt.crew, !crew.abandoned else { return false }
        let before = partial.length
        let end = min(crew.table.contiguous, crew.total - 1, before + SegmentCrew.keptAtSettle)
        try? partial.absorb(upTo: end)  // A failure keeps what was hashed.
        return partial.length > before
    }

    /// Why a whole body of `length` bytes hashing to `digest` is not the file the callers asked
    /// for (nil: it is).
    static func unmet(sha256: String?, size: Int64?, digest: String, length: Int64) -> DownloadFailure? {
        if let size, size != length {
            return DownloadFailure(code: .sizeMismatch, message: "received \(length) bytes, expected \(size)")
        }
        if let sha256, sha256 != digest {
            return DownloadFailure(code: .checksumMismatch, message: "sha256 is \(digest), expected \(sha256)")
        }
        return nil
    }

    /// The failure of a download whose publishing intent the state store could not commit.
    static func unrecorded(_ error: StateStoreError?) -> DownloadFailure {
        let detail = "the state database could not record the verified file (\(error?.description ?? "unknown error"))"
        return DownloadFailure(code: error?.kind == .full ? .diskFull : .diskError, message: detail)
    }
}
