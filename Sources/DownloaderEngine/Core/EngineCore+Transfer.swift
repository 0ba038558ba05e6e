import Basics
import Foundation
import Glibc

// A running attempt's head and body (transfer thread) and its checkpoints (work queue).
extension EngineCore {
    /// Judges the final hop's head (transfer thread). Returns nil to accept the body.
    func attemptReceivedHead(_ attempt: Attempt, _ head: ResponseHead) -> TransferFailure? {
        var setAside: String?
        let refused: TransferFailure? = decide {
            guard let record = byID[attempt.recordID] else { return TransferFailure(.rejected, "the download was paused") }
            let judgement = HeadJudgement.judge(head, plan: attempt.plan, sentValidator: attempt.sentValidator,
                                                knownTotal: record.expectedTotal, maxFileSize: configuration.maxFileSize,
                                                expectedSize: record.expectedSize)
            var accepted: (offset: Int64, total: Int64?)?
            if case .accept(let offset, let total) = judgement { accepted = (offset, total) }
            var refused: TransferFailure?
            handle(.headReceived(serial: attempt.serial, accepts: accepted != nil), for: record) { action in
                switch action {
                case .acceptBody:
                    guard let accepted else { return true }
                    if accepted.offset == 0, let partial = attempt.partial, partial.length > 0 {
                        // A full body replaces the kept bytes: their name is set aside once the lock is released.
                        setAside = partial.path + ".\(makeSerial())" + FileStore.trashSuffix
                    }
                    acceptBody(of: attempt, head, offset: accepted.offset, total: accepted.total, record)
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
            return refused
        }
        if let refused { return refused }
        if let aside = setAside, let partial = attempt.partial {
            do throws(SystemError) {
                try partial.replaceWithEmpty(settingAsideAt: aside)
                deleteInBackground(aside, before: locked { hooks.beforeRemove })
            } catch {
                attempt.diskError = error
                attempt.refusal = .fail(.disk(error), discard: false)
                return TransferFailure(.disk, error.description, code: error.errno)
            }
        }
        return nil
    }

    /// Under `lock`: the accepted head's validator, size and file name; the rate starts afresh.
    private func acceptBody(of attempt: Attempt, _ head: ResponseHead, offset: Int64, total: Int64?, _ record: DownloadRecord) {
        attempt.acceptedOffset = offset
        let offered = ResumePlan.validator(of: head)
        if offset == 0 || offered != nil { record.validator = offered }
        record.expectedTotal = total
        // A full body starts a new file: nothing of it is durable yet.
        record.durableOffset = offset == 0 ? 0 : (attempt.partial?.durableLength ?? 0)
        record.bytesWritten = offset
        if record.fileName == nil || offset == 0 {
            var name = FileNameSanitizer.fileName(contentDisposition: head.value("content-disposition"), url: record.url)
            if name == FileNameSanitizer.fallback && head.value("content-disposition") == nil {
                name = FileNameSanitizer.fileName(contentDisposition: nil, url: head.effectiveURL)
            }
            record.fileName = name
        }
        if offset > 0 { stats.resumes += 1 }
        if attempt.keptAtStart > 0 && offset == 0 { stats.restarts += 1 }
        let now = clock.monotonic()
        record.rate.reset(at: now)
        record.progress.restart(at: now)
        record.updatedAt = clock.now()
    }

    /// Body bytes landed in the partial (transfer thread): bytes, rate, and progress at most once
    /// per interval (with a trailing event for the last bytes).
    func attemptWrote(_ attempt: Attempt, count: Int64, length: Int64, at now: Double) {
        decide {
            stats.bytesFetched += count
            guard let record = byID[attempt.recordID], let current = record.lifecycle.attempt,
                  current.serial == attempt.serial, attempt.acceptedOffset != nil else { return }
            record.bytesWritten = length
            record.rate.add(count, at: now)
            guard !current.abandoned else { return }
            switch record.progress.bytesArrived(at: now) {
            case .emit: emitProgress(record, at: now)
            case .scheduleTrailing(let delay): armTrailingProgress(record, serial: attempt.serial, after: delay)
            case .wait: break
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
    /// duplicate of the partial's, whose first `length` bytes are written), close it, then record
    /// `length` as durable if the attempt is still writing. The journaled offset is never ahead of
    /// synced data: it changes only after the sync succeeded, and not once the attempt is settling
    /// (which may truncate the file).
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
            let after: (@Sendable (String, Int64) -> Void)? = decide {
                defer { attempt.checkpointInFlight.store(false, ordering: .releasing) }
                guard synced, let record = byID[attempt.recordID] else { return nil }
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
}
