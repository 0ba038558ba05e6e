import Basics
import Foundation
import Glibc

// A running attempt's head and body (transfer thread) and its checkpoints (work queue).
extension EngineCore {
    /// Judges the final hop's head (transfer thread). Returns nil to accept the body. A full body
    /// that replaces kept bytes gets a fresh file first (the old one set aside, deleted later), so
    /// that what the download then records (and its readers open) is the new version's file.
    func attemptReceivedHead(_ attempt: Attempt, _ head: ResponseHead) -> TransferFailure? {
        guard let facts: (total: Int64?, size: Int64?, dropped: Bool) = locked({
            record(of: attempt).map { ($0.expectedTotal, $0.expectedSize, $0.droppedBytesUncommitted) }
        }) else { return TransferFailure(.rejected, "the download was paused") }
        var judgement = HeadJudgement.judge(head, plan: attempt.plan, sentValidator: attempt.sentValidator,
                                            knownTotal: facts.total, maxFileSize: configuration.maxFileSize,
                                            expectedSize: facts.size)
        var identity: FileIdentity?
        // An accepted 416 says the kept bytes are the whole file (`ResumePlan`): its body is not the file's.
        attempt.discardsBody = head.status == 416
        if case .accept(let offset, let total) = judgement, offset > 0, head.status == 200, let partial = attempt.partial {
            if attempt.keptSegments || partial.length != offset {
                // Pieces kept after the prefix: the whole answer goes on with them, or starts over.
                judgement = .accept(offset: 0, total: total)
            } else {
                // The kept version again, whole: what it repeats of the kept bytes is checked and skipped.
                attempt.keptSkip = KeptBytesSkip(count: offset, keptSHA256: partial.sha256Hex)
            }
        }
        var drops = false
        if case .accept(let offset, let total) = judgement, let partial = attempt.partial {
            let offered = ResumePlan.validator(of: head)
            // Pieces kept while the prefix kept nothing: a whole body of their version and size
            // (a strong validator's equality is the same bytes) goes on with them.
            attempt.continuesTail = attempt.keptTailOf.map {
                offset == 0 && head.status == 200 && offered == $0.validator && total == $0.total
            } ?? false
            drops = offset == 0 && (partial.length > 0 || attempt.keptSegments) && !attempt.continuesTail
            if Self.recordsRestartFirst(offset: offset, drops: drops, dropped: facts.dropped, sent: attempt.sentValidator,
                                        offered: offered) {
                judgement = .refuse(.restart("a new version, asked for again once the restart is recorded"))
            }
        }
        if case .accept = judgement, let partial = attempt.partial {
            do throws(SystemError) {
                if drops { try startOver(partial) }
                identity = try partial.identity()
            } catch {
                attempt.diskError = error
                // A shortage of descriptors or memory, or a full disk, is tried again (`AttemptEnd`), not the download's failure.
                if !AttemptEnd.passes(error.errno) { attempt.refusal = .fail(.disk(error), discard: false) }
                return TransferFailure(.disk, error.description, code: error.errno)
            }
        }
        return decide {
            guard let record = record(of: attempt) else { return TransferFailure(.rejected, "the download was paused") }
            var refused: TransferFailure?
            handle(.headReceived(serial: attempt.serial, accepts: identity != nil), for: record) { action in
                switch action {
                case .acceptBody:
                    guard case .accept(let offset, let total) = judgement, let identity else { return true }
                    acceptBody(of: attempt, head, offset: offset, total: total, file: identity, record)
                case .refuseBody:
                    if case .refuse(let refusal) = judgement {
                        attempt.refusal = refusal
                        refused = TransferFailure(.rejected, refusal.transferMessage)
                    }
                case .abortUnwanted:
                    refused = TransferFailure(.rejected, "the download was paused")
                default:
                    return false
                }
                return true
            }
            tellHead(record, attempt, head, judgement, refused: refused)
            return refused
        } ?? startSegments(attempt, head)
    }

    /// Whether a body from 0 must not be written yet: it would replace kept bytes (`drops`), or
    /// kept bytes were dropped earlier (`dropped`), and the stored row may still name them, with
    /// their validator, while the body is another version (`offered` is not the validator `sent`
    /// with the resume). A crash would then leave its bytes under the old offset and validator, and
    /// a resume answered by a server still holding the old version would splice the two. Such a
    /// body is refused as a restart: the next attempt records the restart first (`prepare`, off the
    /// transfer thread), then asks again from 0.
    static func recordsRestartFirst(offset: Int64, drops: Bool, dropped: Bool, sent: Validator?, offered: Validator?) -> Bool {
        guard offset == 0, drops || dropped else { return false }
        return sent == nil || offered != sent
    }

    /// Under `lock`: the accepted head's validator, size, type and file name; the rate starts
    /// afresh; a body from 0 that replaces kept bytes is a new version for readers.
    private func acceptBody(of attempt: Attempt, _ head: ResponseHead, offset: Int64, total: Int64?, file: FileIdentity,
                            _ record: DownloadRecord) {
        attempt.acceptedOffset = offset
        if head.status == 206, let range = ContentRange.parse(head.value("content-range") ?? "") { attempt.rangeEnd = range.last + 1 }
        let offered = ResumePlan.validator(of: head)
        let newVersion = BodyVersion.isNew(offset: offset, keptAtStart: attempt.keptAtStart, generation: record.generation,
                                           current: record.validator, offered: offered)
        if offset == 0 || offered != nil { record.validator = offered }
        record.expectedTotal = total
        // A full body starts a new file: nothing of it is durable yet.
        record.durableOffset = offset == 0 ? 0 : (attempt.partial?.durableLength ?? 0)
        record.bytesWritten = offset
        if record.fileName == nil || offset == 0 {
            record.fileName = FileNameSanitizer.fileName(of: head, url: record.url)
        }
        if offset > 0 { stats.resumes += 1 }
        if attempt.restarts(at: offset) {
            stats.restarts += 1
            record.restartPending = false
        }
        if newVersion {
            if record.generation > 0 { record.changedAt = clock.now() }
            record.generation += 1
        }
        record.heads += 1
        if !attempt.discardsBody { record.contentType = head.value("content-type") }
        record.flushedBytes = offset
        record.repeating = attempt.keptSkip?.remaining ?? 0
        record.partialIdentity = file
        record.lastAttemptStalled = false
        let now = clock.monotonic()
        record.rate.reset(at: now)
        record.progress.restart(at: now)
        record.updatedAt = clock.now()
        planSegments(attempt, head, offset: offset, total: total, record)
        // Pieces kept after the prefix count too (the `resumed` event's and progress's total).
        if let segments = record.segments { record.bytesWritten = max(offset, segments.writtenBytes) }
        refreshTail(record)
    }

    /// Under `lock`: readers' view of `record` is brought up to date once the lock is released (in
    /// decision order with everything else). Called once the data of a decision is applied (an
    /// accepted head, a lifecycle event), never half-way through applying it.
    func refreshTail(_ record: DownloadRecord) {
        guard let tail = record.tail else { return }
        let state = record.tailState(partialPath: partialPath(of: record))
        effects.append { tail.update { $0 = state } }
    }

    /// Body bytes landed in the partial (transfer thread; a segmented attempt's fetches: the crew's
    /// writer queue): bytes, rate, and progress at most once per interval (with a trailing event
    /// for the last bytes). A segmented attempt's total only grows: the prefix and the fetches
    /// read it under the crew's lock, then report it from two threads, in either order.
    /// `repeating`: bytes a whole answer to a resume still repeats of the kept ones (`KeptBytesSkip`).
    func attemptWrote(_ attempt: Attempt, count: Int64, length: Int64, at now: Double, repeating: Int64 = 0) {
        decide {
            stats.bytesFetched += count
            guard let record = record(of: attempt), let current = record.lifecycle.attempt,
                  current.serial == attempt.serial, attempt.acceptedOffset != nil else { return }
            record.bytesWritten = attempt.crew == nil ? length : max(record.bytesWritten, length)
            record.repeating = repeating
            record.story.received += count
            record.rate.add(count, at: now)
            record.tail?.noteLanding()
            guard !current.abandoned else { return }
            switch record.progress.bytesArrived(at: now) {
            case .emit: emitProgress(record, at: now)
            case .scheduleTrailing(let delay): armTrailingProgress(record, serial: attempt.serial, after: delay)
            case .wait: break
            }
        }
    }

    /// The attempt's bytes up to `length` are in its partial file (on the partial's write lane, or
    /// the thread that wrote what a failed write left): readers may read them now. Readers are
    /// never shown a byte before it is in the file, nor bytes of another version (`generation`).
    func attemptFlushed(_ attempt: Attempt, length: Int64) {
        decide {
            guard let record = record(of: attempt), let current = record.lifecycle.attempt,
                  current.serial == attempt.serial, attempt.acceptedOffset != nil,
                  length > record.flushedBytes else { return }
            record.flushedBytes = length
            if let tail = record.tail {
                let generation = record.generation
                effects.append { tail.update { if $0.generation == generation { $0.available = max($0.available, length) } } }
            }
        }
    }

    private func emitProgress(_ record: DownloadRecord, at now: Double) {
        record.progress.emitted(at: now, bytes: record.bytesWritten)
        record.updatedAt = clock.now()
        publish(.progress(record.snapshot()), of: record)
    }

    /// Paced out: the last bytes are told one interval after the previous event even if no further
    /// write comes (a stalling origin).
    private func armTrailingProgress(_ record: DownloadRecord, serial: UInt64, after delay: Double) {
        let id = record.id
        effects.append { [scheduler] in
            scheduler.schedule(after: delay) { [weak self] in self?.trailingProgressDue(id: id, serial: serial) }
        }
    }

    private func trailingProgressDue(id: String, serial: UInt64) {
        decide {
            guard let record = byID[id], record.progress.trailingDue(bytes: record.bytesWritten),
                  let current = record.lifecycle.attempt, current.serial == serial, !current.abandoned else { return }
            emitProgress(record, at: clock.monotonic())
        }
    }

    /// A checkpoint (from the partial's write lane or the transfer thread): on the work queue, fdatasync `descriptor` (a
    /// second descriptor of the partial's file, whose first `length` bytes are written), close it, then record
    /// `length` as durable if the attempt is still writing. The stored offset is never ahead of
    /// synced data: it changes only after the sync succeeded, and not once the attempt is settling
    /// (which may truncate the file), nor after a sync of the attempt failed (`Attempt.lostSync`).
    func checkpoint(_ attempt: Attempt, descriptor: Int32, length: Int64) {
        let (before, sync) = locked { (hooks.beforeCheckpointSync, hooks.partialSync) }
        workQueue.async { [self] in
            before?()
            let failure = Self.checkpointSync(descriptor, sync)
            let after: (@Sendable (String, Int64) -> Void)? = decide {
                defer { attempt.checkpointInFlight.store(false, ordering: .releasing) }
                guard let record = record(of: attempt), noteSync(failure, of: attempt, record) else { return nil }
                var advanced = false
                handle(.checkpointSynced(serial: attempt.serial), for: record) { action in
                    guard action == .keepDurableOffset else { return false }
                    advanced = length > record.durableOffset
                    if advanced { record.durableOffset = length }
                    return true
                }
                return advanced ? hooks.checkpointed : nil
            }
            after?(attempt.recordID, length)
        }
    }

    /// Work queue: fdatasyncs and closes a checkpoint's descriptor (through the `partialSync` seam).
    static func checkpointSync(_ descriptor: Int32, _ sync: PartialFile.SyncCall?) -> SystemError? {
        defer { Glibc.close(descriptor) }
        do throws(SystemError) {
            try syscall("fdatasync") { sync?(descriptor) ?? fdatasync(descriptor) }
            return nil
        } catch {
            return error
        }
    }

    /// Under `lock`, after a checkpoint's sync: whether its offsets may be stored. The first
    /// failure marks the attempt (its bytes past the stored offset may be lost).
    func noteSync(_ failure: SystemError?, of attempt: Attempt, _ record: DownloadRecord) -> Bool {
        guard attempt.lostSync == nil else { return false }
        guard let failure else { return true }
        attempt.lostSync = (failure, record.durableOffset)
        return false
    }
}
