import Basics
import Foundation

// Starting attempts and the retry timer.
extension EngineCore {
    /// Under `lock`: a new attempt takes over the kept bytes; its partial is prepared on the work
    /// queue and then handed to the driver.
    func startAttempt(_ record: DownloadRecord, serial: UInt64) {
        let attempt = Attempt(serial: serial, record: record, core: self, checkpointBytes: checkpointBytes,
                              checkpointSeconds: configuration.checkpointInterval)
        record.attempt = attempt
        attempt.lease = record.lease
        if record.readers > 0 { attempt.followed.store(true, ordering: .relaxed) }
        let kept = record.keptBytes
        let hash = record.keptHash
        record.keptHash = nil
        attempt.keptAtStart = kept
        attempt.heldAtStart = record.partialBytes
        attempt.followsRestart = record.restartPending
        let validator = record.validator
        let path = partialPath(of: record)
        let (write, sync) = (hooks.partialWrite, hooks.partialSync)
        // Pieces are kept under a strong validator, also when the prefix kept nothing.
        let keepTail = record.segments.map { kept > 0 || $0.writtenBytes > 0 } == true && validator != nil
        if !keepTail { record.segments = nil }
        attempt.keptSegments = keepTail
        if keepTail, kept == 0, let validator, let total = record.segments?.last?.end { attempt.keptTailOf = (validator, total) }
        // After a full disk, the origin is asked again only once there is room (`SpaceWait`).
        let partialBytes = record.partialBytes
        let spaceWanted = record.lifecycle.waitsForSpace
            ? SpaceWait.wanted(remaining: record.expectedTotal.map { $0 - partialBytes }) : nil
        let recordFirst = record.droppedBytesUncommitted
        effects.append { [self] in
            workQueue.async {
                if recordFirst, let failure = self.recordDroppedBytes(attempt) {
                    self.attemptEnded(attempt, .failure(failure))
                    return
                }
                self.prepare(attempt, path: path, kept: kept, keepTail: keepTail, hash: hash, validator: validator, write: write,
                             sync: sync, spaceWanted: spaceWanted)
            }
        }
    }

    /// Work queue, before an attempt after dropped bytes asks the origin: the stored row that may
    /// still name them (with their validator) is replaced durably, so that no byte of another
    /// version lands under it (`recordsRestartFirst`). A state store that cannot commit ends the
    /// attempt: a full one as a full disk (waited on), another failure as one to try again.
    func recordDroppedBytes(_ attempt: Attempt) -> TransferFailure? {
        guard stateWriter.flush() else {
            let error = stateWriter.lastError
            let reason = "the state store could not record the restart: \(error?.message ?? "its commit failed")"
            guard error?.kind == .full else { return TransferFailure(.connection, reason) }
            attempt.diskError = SystemError(errno: ENOSPC, function: "recording the restart in the state store")
            return TransferFailure(.disk, reason, code: ENOSPC)
        }
        if let lease = attempt.lease, !lease.mayWrite(now: clock.monotonic()) {
            return TransferFailure(.connection, "the download's lease ran out before its restart was recorded")
        }
        locked { if let record = record(of: attempt), record.attempt === attempt { record.droppedBytesUncommitted = false } }
        return nil
    }

    /// Work queue: opens the partial (keeping what can be resumed) and plans the request, then
    /// launches; ends the attempt at once, as on a full disk, while its file system has less than
    /// `spaceWanted` bytes free.
    private func prepare(_ attempt: Attempt, path: String, kept: Int64, keepTail: Bool, hash: KeptHash?, validator: Validator?,
                         write: PartialFile.WriteCall?, sync: PartialFile.SyncCall?, spaceWanted: Int64?) {
        // Space for the new bytes first: paused partials go before a low disk fills up.
        checkPressure(memory: false)
        if let spaceWanted, let free = pressure.space(of: (path as NSString).deletingLastPathComponent)?.writable, free < spaceWanted {
            // The kept hash stays the record's (nothing was opened): the attempt that resumes reuses it.
            locked { if let record = record(of: attempt), record.keptHash == nil { record.keptHash = hash } }
            attempt.diskError = SystemError(errno: ENOSPC, function: "statvfs")
            let message = "no space left on the device: \(free) bytes free, waiting for \(spaceWanted)"
            attemptEnded(attempt, .failure(TransferFailure(.disk, message, code: ENOSPC)))
            return
        }
        locked { hooks.beforePrepare }?()
        do throws(SystemError) {
            if kept == 0 && !keepTail && (FileStore.fileSize(path) ?? 0) > 0 {
                // Bytes none of which was kept (e.g. a sync failed before the first checkpoint):
                // a new inode, never a truncation, as `startOver` (readers may still hold the old one).
                let aside = locked { asideName(for: path) }
                try syscall("rename") { rename(path, aside) }
                deleteInBackground(aside, before: locked { hooks.beforeRemove })
            }
            let partial = try PartialFile(path: path, keep: kept, keepTail: keepTail, hash: hash, write: write,
                                          sync: sync)
            partial.whenAdvanced { [weak self, weak attempt] length in
                if let self, let attempt { self.attemptFlushed(attempt, length: length) }
            }
            partial.measureWaits(cpuWaitMeter)
            var plan = ResumePlan.request(kept: partial.length, validator: validator)
            if plan.discardsKeptBytes || partial.length == 0 {
                if partial.length > 0 { try startOver(partial) }
                plan.offset = 0
            }
            attempt.partial = partial
            attempt.plan = plan
            attempt.sentValidator = plan.offset > 0 ? validator : nil
        } catch {
            attempt.diskError = error
            attemptEnded(attempt, .failure(TransferFailure(.disk, error.description, code: error.errno)))
            return
        }
        launch(attempt)
    }

    /// Not under `lock`: gives `partial` a new, empty file under its name and deletes the old one in
    /// the background. A new inode, not a truncation: a `/fetch` reader of the old version may still
    /// have ranges of it queued for `sendfile` on its descriptor, and must never read new bytes there.
    func startOver(_ partial: PartialFile) throws(SystemError) {
        let aside = locked { asideName(for: partial.path) }
        try partial.replaceWithEmpty(settingAsideAt: aside)
        deleteInBackground(aside, before: locked { hooks.beforeRemove })
    }

    /// Hands a prepared attempt to the driver, unless nobody wants it any more (no lock held).
    private func launch(_ attempt: Attempt) {
        let request: TransferRequest? = decide {
            guard let record = record(of: attempt), let current = record.lifecycle.attempt,
                  current.serial == attempt.serial, !current.abandoned else { return nil }
            tellAttemptStarted(record, attempt)
            // No body is longer than the file; the file's own length is held to the limit as it is
            // written (`Attempt.write`: a whole answer to a resume may repeat the bytes kept).
            let maxBody = configuration.maxFileSize
            return TransferRequest(
                url: record.url, headers: attempt.plan.headers.map { ($0.name, $0.value) },
                connectTimeout: configuration.connectTimeout, headTimeout: configuration.headTimeout,
                stallTimeout: configuration.stallTimeout, minSpeed: configuration.minSpeed,
                speedShare: configuration.minSpeed > 0 ? SpeedShare() : nil, freshConnection: record.lastAttemptStalled,
                maxBodyBytes: maxBody, maxRedirects: configuration.maxRedirects,
                allowPrivateNetworks: configuration.allowPrivateNetworks, userAgent: configuration.userAgent,
                credentials: record.credentials?.fields ?? [])
        }
        guard let request else {
            attemptEnded(attempt, .failure(TransferFailure(.cancelled, "abandoned before start")))
            return
        }
        attempt.launched = request
        let main = driver.start(request, delegate: attempt)
        attempt.started(main)
        let handle = AttemptHandle(main: main, attempt: attempt)
        // Abandoned meanwhile, the cancel decided then found no handle: cancel now. Removed
        // meanwhile (no record any more): nobody wants its bytes, cancel too (a transfer that
        // already ended ignores it). Already ended: keep no reference (the transfer holds the
        // attempt as its delegate).
        let cancelNow: Bool = locked {
            // Adopted again meanwhile (cluster mode): the new record's attempts are its own.
            guard let record = record(of: attempt) else { return tombstones.contains(id: attempt.recordID) || byID[attempt.recordID] != nil }
            guard let current = record.lifecycle.attempt, current.serial == attempt.serial else { return false }
            if current.stage == .starting || current.stage == .transferring { attempt.handle = handle }
            return current.abandoned
        }
        if cancelNow { handle.cancel() }
    }

    /// Under `lock`: arms the retry timer `token` with the policy's delay.
    func scheduleRetry(_ record: DownloadRecord, token: UInt64, attemptsMade: Int, retryAfter: String?) {
        let waiting = record.lifecycle.waitsForSpace
        let delay = waiting ? SpaceWait.step(maxDelay: retryPolicy.maxDelay)  // As `SpaceWait.checks` counts them.
            : retryPolicy.delay(attemptsMade: attemptsMade, retryAfter: retryAfter, now: clock.now(), unit: random.unit())
        let (id, incarnation) = (record.id, record.incarnation)
        // Watchers see a wait for disk space begin (`reason`); the next `resumed` ends it. Its
        // further looks at the free space are neither retries nor told.
        let waitBegins = waiting && record.lifecycle.spaceWaitBegan
        if !waiting || waitBegins {
            stats.retries += 1
            tellRetry(record, delay: delay)
        }
        if waitBegins { publish(.progress(record.snapshot()), of: record) }
        effects.append { [scheduler] in
            scheduler.schedule(after: delay) { [weak self] in self?.retryDue(id: id, incarnation: incarnation, token: token) }
        }
    }

    /// The retry timer `token` of a record ran out: told to its lifecycle while that record is the
    /// one held (an evicted record's timer never starts the attempt of one adopted again meanwhile,
    /// whose tokens count afresh).
    private func retryDue(id: String, incarnation: UInt64, token: UInt64) {
        decide {
            guard let record = byID[id], record.incarnation == incarnation else { return }
            handle(.retryDue(token: token), for: record)
        }
    }
}
