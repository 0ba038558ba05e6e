import Basics
import Foundation
import Glibc

// An attempt's head, body progress and end.
extension EngineCore {
    /// Judges the final hop's head (transfer thread). Returns nil to accept the body.
    func attemptReceivedHead(_ attempt: Attempt, _ head: ResponseHead) -> TransferFailure? {
        lock.lock()
        defer { lock.unlock() }
        guard let record = byID[attempt.recordID], record.attempt === attempt, !attempt.abandoned, !shuttingDown else {
            return TransferFailure(.rejected, "the download was paused")
        }
        let decision = ResumePlan.decide(head: head, requested: attempt.plan, sentValidator: attempt.sentValidator,
                                         knownTotal: record.expectedTotal)
        switch decision {
        case .restartNextAttempt(let reason):
            attempt.outcome = .restart(reason)
            return TransferFailure(.rejected, reason)
        case .retry(let status, let retryAfter):
            attempt.outcome = .httpRetry(status: status, retryAfter: retryAfter)
            return TransferFailure(.rejected, "HTTP \(status)")
        case .fail(let status):
            attempt.outcome = .httpFail(status: status)
            return TransferFailure(.rejected, "HTTP \(status)")
        case .accept(let offset, _, let total):
            if let limit = configuration.maxFileSize, let total, total > limit {
                attempt.outcome = .fail(DownloadFailure(code: "too_large", message: "the file has \(total) bytes, more than the limit of \(limit)"), discard: false)
                return TransferFailure(.rejected, "too large")
            }
            if let expected = record.expectedSize, let total, total != expected {
                attempt.outcome = .fail(DownloadFailure(code: "size_mismatch", message: "the origin announces \(total) bytes, expected \(expected)"), discard: true)
                return TransferFailure(.rejected, "size mismatch")
            }
            guard let partial = attempt.partial else { return TransferFailure(.rejected, "no partial file") }
            if offset == 0 && partial.length > 0 {
                // Under the lock, so no waiting for the old bytes' blocks to be freed: set aside.
                let aside = partial.path + ".\(makeSerial())" + FileStore.trashSuffix
                do {
                    try partial.replaceWithEmpty(settingAsideAt: aside)
                    removeLater(aside)
                } catch {
                    attempt.diskError = error
                    attempt.outcome = .fail(diskFailure(error), discard: false)
                    return TransferFailure(.disk, error.description, code: error.errno)
                }
            }
            attempt.headAccepted = true
            attempt.acceptedOffset = offset
            let offered = ResumePlan.validator(of: head)
            if offset == 0 || offered != nil { record.validator = offered }
            record.expectedTotal = total
            record.durableOffset = partial.durableLength
            record.bytesWritten = offset
            if record.fileName == nil || offset == 0 {
                var name = FileNameSanitizer.fileName(contentDisposition: head.value("content-disposition"), url: record.url)
                if name == FileNameSanitizer.fallback && head.value("content-disposition") == nil {
                    name = FileNameSanitizer.fileName(contentDisposition: nil, url: head.effectiveURL)
                }
                record.fileName = name
            }
            let discarded = attempt.keptAtStart > 0 && offset == 0
            if offset > 0 { stats.resumes += 1 }
            if discarded { stats.restarts += 1 }
            let now = clock.monotonic()
            record.rate.reset(at: now)
            record.lastProgressAt = now
            record.updatedAt = clock.now()
            emit(record, .resumed(offset: offset, restarted: discarded, record.snapshot()))
            saveJournal()
            return nil
        }
    }

    /// Body bytes landed in the partial (transfer thread).
    func attemptWrote(_ attempt: Attempt, count: Int64, length: Int64, at now: Double) {
        lock.lock()
        defer { lock.unlock() }
        stats.bytesFetched += count
        guard let record = byID[attempt.recordID], record.attempt === attempt, attempt.headAccepted else { return }
        record.bytesWritten = length
        record.rate.add(count, at: now)
        guard !attempt.abandoned else { return }
        let sinceLast = now - record.lastProgressAt
        if sinceLast >= configuration.progressInterval {
            emitProgress(record, at: now)
        } else if !record.trailingProgressPending {
            // Paced out: make sure the last bytes are reported even if no further write comes
            // (a stalling origin), one interval after the previous event.
            record.trailingProgressPending = true
            let id = record.id
            let delay = configuration.progressInterval - sinceLast
            timerQueue.asyncAfter(deadline: .now() + delay) { [weak self] in
                guard let self else { return }
                self.locked {
                    guard let record = self.byID[id] else { return }
                    record.trailingProgressPending = false
                    guard let current = record.attempt, current === attempt, !current.abandoned,
                          record.bytesWritten != record.lastProgressBytes else { return }
                    self.emitProgress(record, at: self.clock.monotonic())
                }
            }
        }
    }

    /// A checkpoint (called on the transfer thread): on the work queue, fdatasync `descriptor` (a
    /// duplicate of the partial's, whose first `length` bytes are written), close it, then journal
    /// `length` as durable if the attempt is still the running one. The journaled offset is never
    /// ahead of synced data: it changes only after the sync succeeded, and not once the attempt is
    /// settling (which may truncate the file).
    func checkpoint(_ attempt: Attempt, descriptor: Int32, length: Int64) {
        let before = locked { hooks.beforeCheckpointSync }
        workQueue.async { [self] in
            before?()
            var synced = true
            do throws(SystemError) {
                try syscall("fdatasync") { fdatasync(descriptor) }
            } catch {
                synced = false  // The write path or the settling sync reports disk trouble.
            }
            Glibc.close(descriptor)
            let after: (@Sendable (String, Int64) -> Void)? = locked {
                defer { attempt.checkpointInFlight.store(false, ordering: .releasing) }
                guard synced, let record = byID[attempt.recordID], record.attempt === attempt,
                      attempt.headAccepted, !attempt.settling, length > record.durableOffset else { return nil }
                record.durableOffset = length
                saveJournal()
                return hooks.checkpointed
            }
            after?(attempt.recordID, length)
        }
    }

    private func emitProgress(_ record: DownloadRecord, at now: Double) {
        record.lastProgressAt = now
        record.lastProgressBytes = record.bytesWritten
        record.updatedAt = clock.now()
        emit(record, .progress(record.snapshot()))
    }

    func diskFailure(_ error: SystemError) -> DownloadFailure {
        error.isNoSpace
            ? DownloadFailure(code: "disk_full", message: "no space left on the device")
            : DownloadFailure(code: "disk_error", message: error.description)
    }

    /// What the unlocked part of `attemptFinished` achieved.
    private enum Settlement {
        case published(path: String, sha256: String, size: Int64, storage: StorageClass)
        case failed(DownloadFailure, discard: Bool)
        /// The body ended short of the announced size: resume.
        case incomplete
        case notDone
    }

    /// The attempt ended (work queue). Verifies and publishes a complete body, or settles the
    /// partial and decides between pause, retry and failure.
    func attemptFinished(_ attempt: Attempt, _ result: Result<TransferSummary, TransferFailure>) {
        let context: (sha: String?, size: Int64?, total: Int64?, storage: StorageClass, name: String, id: String)? = locked {
            attempt.settling = true
            attempt.handle = nil  // The transfer holds the attempt as its delegate: break the cycle.
            guard let record = byID[attempt.recordID], record.attempt === attempt else { return nil }
            return (record.expectedSHA256, record.expectedSize, record.expectedTotal, record.storage,
                    record.fileName ?? FileNameSanitizer.fallback, record.id)
        }
        let partial = attempt.partial
        attempt.partial = nil
        guard let context else {
            _ = partial?.close()
            return
        }
        var settlement = Settlement.notDone
        if case .success = result, attempt.outcome == nil, attempt.headAccepted, let partial {
            settlement = verifyAndPublish(attempt, partial, sha: context.sha, size: context.size, total: context.total,
                                          storage: context.storage, name: context.name, id: context.id)
        } else if let partial {
            // A restart discards the partial below: no point syncing it.
            if case .restart = attempt.outcome {} else { try? partial.sync() }
        }
        let durable = partial?.durableLength ?? 0
        let closed = partial?.close()
        lock.lock()
        defer { lock.unlock() }
        guard let record = byID[attempt.recordID], record.attempt === attempt else { return }
        record.attempt = nil
        defer { if shuttingDown { resumeShutdownIfDrained() } }
        if let closed {
            record.keptBytes = closed.length
            record.keptHasher = closed.hasher
            record.durableOffset = durable
            record.bytesWritten = closed.length
        }
        record.updatedAt = clock.now()
        switch settlement {
        case .published(let path, let sha, let size, let storage):
            complete(record, path: path, sha256: sha, size: size, storage: storage)
            return
        case .failed(let failure, let discard):
            record.publishing = nil
            if discard { discardPartial(record) }
            fail(record, failure)
            return
        case .incomplete, .notDone:
            break
        }
        if case .restart = attempt.outcome {
            record.validator = nil
            record.expectedTotal = nil
            discardPartial(record)
        }
        if shuttingDown {
            saveJournal()
            return
        }
        if attempt.abandoned {
            if record.state == .paused {
                settlePausedPartial(record)
                emit(record, .paused(record.snapshot()))
            }
            if record.startAfterDrain, record.state == .downloading {
                record.startAfterDrain = false
                beginAttempt(record)
            }
            saveJournal()
            return
        }
        var retryAfter: String?
        var httpStatus: Int?
        var failure: DownloadFailure?
        if case .incomplete = settlement {
            // Resume from the kept bytes.
        } else if let outcome = attempt.outcome {
            switch outcome {
            case .restart: break
            case .httpRetry(let status, let after):
                retryAfter = after
                httpStatus = status
            case .httpFail(let status):
                if status == 404 || status == 410 { discardPartial(record) }
                failure = DownloadFailure(code: "http_error", message: "the origin answered HTTP \(status)", httpStatus: status)
            case .fail(let f, let discard):
                if discard { discardPartial(record) }
                failure = f
            }
        } else if case .failure(let transferFailure) = result {
            failure = failureAfter(transferFailure, attempt: attempt)
        }
        if let failure {
            fail(record, failure)
        } else if retryPolicy.allowsRetry(attemptsMade: record.attemptsMade) {
            scheduleRetry(record, retryAfter: retryAfter)
            saveJournal()
        } else {
            let reason: String
            if case .failure(let f) = result, attempt.outcome == nil { reason = f.message } else { reason = httpStatus.map { "HTTP \($0)" } ?? "unusable answer" }
            fail(record, DownloadFailure(code: "retries_exhausted",
                                         message: "gave up after \(record.attemptsMade) attempts: \(reason)", httpStatus: httpStatus))
        }
    }

    /// nil: retry. Otherwise the failure to report (codes from `RetryPolicy.classify`).
    private func failureAfter(_ failure: TransferFailure, attempt: Attempt) -> DownloadFailure? {
        switch failure.kind {
        case .cancelled:
            return nil  // Not cancelled by us (we only cancel abandoned attempts): try again.
        case .tooLarge where attempt.plan.offset > 0 && attempt.acceptedOffset == 0:
            return nil  // The limit was reduced by kept bytes that a full answer then discarded.
        case .disk:
            if let error = attempt.diskError { return diskFailure(error) }
            if let code = failure.code { return diskFailure(SystemError(errno: code, function: "write")) }
            return DownloadFailure(code: "disk_error", message: failure.message)
        default:
            switch RetryPolicy.classify(failure.kind) {
            case .retry: return nil
            case .fail(let code): return DownloadFailure(code: code, message: failure.message)
            }
        }
    }

    /// Checks size and SHA-256, then fsyncs and moves the file into its area (no lock held).
    /// Between the fsync and the rename the journal records the intent (target, SHA-256, size) and
    /// is flushed, so a crash on either side of the rename recovers the file as completed.
    private func verifyAndPublish(_ attempt: Attempt, _ partial: PartialFile, sha: String?, size: Int64?, total: Int64?,
                                  storage: StorageClass, name: String, id: String) -> Settlement {
        let length = partial.length
        if let total, length < total { return .incomplete }
        if let total, length > total {
            return .failed(DownloadFailure(code: "size_mismatch", message: "received \(length) bytes, the origin announced \(total)"), discard: true)
        }
        if let size, size != length {
            return .failed(DownloadFailure(code: "size_mismatch", message: "received \(length) bytes, expected \(size)"), discard: true)
        }
        let digest = partial.sha256Hex
        if let sha, sha != digest {
            return .failed(DownloadFailure(code: "checksum_mismatch", message: "sha256 is \(digest), expected \(sha)"), discard: true)
        }
        do {
            try partial.fullSync()
            let target = store.finalPath(id: id, fileName: name, storage: storage)
            let hooks: EngineHooks = locked {
                if let record = byID[id], record.attempt === attempt {
                    record.publishing = PublishIntent(path: target, sha256: digest, size: length)
                    saveJournal()
                }
                return self.hooks
            }
            journalWriter.flush()
            hooks.beforePublishRename?()
            try store.publish(from: partial.path, to: target)
            hooks.afterPublishRename?()
            return .published(path: target, sha256: digest, size: length, storage: storage)
        } catch {
            return .failed(diskFailure(error), discard: false)
        }
    }
}
