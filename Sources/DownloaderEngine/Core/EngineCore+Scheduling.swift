import Basics
import Foundation

// Slots, the FIFO queue, starting attempts and retry timers. Everything here runs under `lock`
// unless it says otherwise.
extension EngineCore {
    /// Queues `record` for a transfer slot, starting at once when one is free.
    func schedule(_ record: DownloadRecord) {
        guard !shuttingDown else { return }
        record.state = .queued
        record.attemptsMade = 0
        if activeSlots < max(1, configuration.maxConcurrentTransfers) {
            startRun(record)
        } else if !waiting.contains(record.id) {
            waiting.append(record.id)
        }
    }

    private func startRun(_ record: DownloadRecord) {
        record.holdsSlot = true
        activeSlots += 1
        stats.activeTransfers = activeSlots
        record.state = .downloading
        beginAttempt(record)
    }

    func releaseSlot(_ record: DownloadRecord) {
        guard record.holdsSlot else { return }
        record.holdsSlot = false
        activeSlots -= 1
        stats.activeTransfers = activeSlots
        while !shuttingDown, activeSlots < max(1, configuration.maxConcurrentTransfers), !waiting.isEmpty {
            let id = waiting.removeFirst()
            if let next = byID[id], next.state == .queued { startRun(next) }
        }
    }

    /// Starts one attempt: prepares the partial on the work queue, then hands it to the driver.
    func beginAttempt(_ record: DownloadRecord) {
        guard !shuttingDown, record.state == .downloading else { return }
        if record.attempt != nil {
            record.startAfterDrain = true
            return
        }
        record.attemptsMade += 1
        let attempt = Attempt(serial: makeSerial(), recordID: record.id, core: self, checkpointBytes: checkpointBytes,
                              checkpointSeconds: configuration.checkpointInterval)
        record.attempt = attempt
        let kept = record.keptBytes
        let hasher = record.keptHasher
        record.keptHasher = nil
        attempt.keptAtStart = kept
        let validator = record.validator
        let path = store.partialPath(id: record.id)
        let write = hooks.partialWrite
        workQueue.async {
            // Space for the new bytes first: paused partials go before a low disk fills up.
            self.checkPressure(memory: false)
            let partial: PartialFile
            do throws(SystemError) {
                partial = try PartialFile(path: path, keep: kept, hasher: hasher, hashedLength: kept, write: write)
                var plan = ResumePlan.request(kept: partial.length, validator: validator)
                if plan.discardsKeptBytes || partial.length == 0 {
                    if partial.length > 0 { try partial.truncateToZero() }
                    plan.offset = 0
                }
                attempt.partial = partial
                attempt.plan = plan
                attempt.sentValidator = plan.offset > 0 ? validator : nil
            } catch {
                attempt.diskError = error
                self.attemptFinished(attempt, .failure(TransferFailure(.disk, error.description, code: error.errno)))
                return
            }
            self.launch(attempt)
        }
    }

    /// Hands a prepared attempt to the driver (called without the lock).
    private func launch(_ attempt: Attempt) {
        let request: TransferRequest? = locked {
            guard let record = byID[attempt.recordID], record.attempt === attempt, !attempt.abandoned else { return nil }
            var maxBody = configuration.maxFileSize
            if let limit = maxBody { maxBody = max(0, limit - attempt.plan.offset) }
            return TransferRequest(
                url: record.url, headers: attempt.plan.headers.map { ($0.name, $0.value) },
                connectTimeout: configuration.connectTimeout, stallTimeout: configuration.stallTimeout,
                maxBodyBytes: maxBody, maxRedirects: configuration.maxRedirects,
                allowPrivateNetworks: configuration.allowPrivateNetworks, userAgent: configuration.userAgent)
        }
        guard let request else {
            attemptFinished(attempt, .failure(TransferFailure(.cancelled, "abandoned before start")))
            return
        }
        let handle = driver.start(request, delegate: attempt)
        let cancelNow: Bool = locked {
            if !attempt.settling { attempt.handle = handle }  // Already finished: keep no cycle.
            return attempt.abandoned
        }
        if cancelNow { handle.cancel() }
    }

    /// Retries `record` after the policy's delay (a cancellable timer owned by the engine).
    func scheduleRetry(_ record: DownloadRecord, retryAfter: String?) {
        stats.retries += 1
        let delay = retryPolicy.delay(attemptsMade: record.attemptsMade, retryAfter: retryAfter,
                                      now: clock.now(), unit: random.unit())
        let id = record.id
        let token = makeSerial()
        record.retryToken = token
        let work = DispatchWorkItem { [weak self] in
            guard let self else { return }
            self.locked {
                guard let record = self.byID[id], record.retryToken == token, record.retryTimer != nil else { return }
                record.retryTimer = nil
                self.beginAttempt(record)
            }
        }
        record.retryTimer = work
        timerQueue.asyncAfter(deadline: .now() + delay, execute: work)
    }
}
