import Basics
import Foundation
import Glibc

/// The connections of one segmented attempt. Segment 0 (the file's prefix) is the attempt's own
/// transfer, appended to the partial and hashed as it arrives; it stops at the next segment's start.
/// Every other segment is a `SegmentFetch` writing in place. A fetch cut or answered with a
/// transient status asks again from where it stood (at most `retriesPerSegment` times); so does
/// the prefix when its own transfer is cut (a fetch takes it over). Any answer from another version
/// abandons all segments (the attempt ends refused with `.restart`: the download starts again from
/// 0 on one connection). The attempt ends (`Attempt.crewFinished`) once its own transfer and every
/// fetch ended: successfully when every segment is complete.
///
/// Threads: fetch and transfer callbacks come on the transfer thread; `cancel` from any thread. The
/// state is under `lock`, never held while calling out.
final class SegmentCrew: @unchecked Sendable {
    static let retriesPerSegment = 3

    let total: Int64
    let validator: Validator
    private weak var attempt: Attempt?
    private weak var core: EngineCore?
    private let driver: TransferStarting
    private let template: TransferRequest
    private let head: ResponseHead
    private let fd: Int32

    private let lock = NSLock()
    // Guarded by `lock`.
    private var segments: [Segment]
    private var running: [Int: TransferHandle] = [:]
    private var retries: [Int]
    private var mainRunning = true
    private var stopping = false
    private var failure: TransferFailure?
    private var finished = false
    private(set) var abandonReason: String?
    /// Checkpoints of the segments after the prefix (`EngineCore.checkpointSegments`): every
    /// `checkpointBytes` or `checkpointSeconds` of their writing, one at a time.
    private let checkpointBytes: Int64
    private let checkpointSeconds: Double
    private var lastCheckpoint: Double
    private var unsynced: Int64 = 0
    private var checkpointInFlight = false

    /// Opens the partial at `path` for the fetches' in-place writes.
    init(attempt: Attempt, core: EngineCore, driver: TransferStarting, template: TransferRequest, head: ResponseHead,
         validator: Validator, total: Int64, segments: [Segment], path: String,
         checkpoint: (bytes: Int64, seconds: Double)) throws(SystemError) {
        checkpointBytes = max(1, checkpoint.bytes)
        checkpointSeconds = max(0, checkpoint.seconds)
        lastCheckpoint = core.clock.monotonic()
        self.attempt = attempt
        self.core = core
        self.driver = driver
        self.template = template
        self.head = head
        self.validator = validator
        self.total = total
        self.segments = segments
        retries = Array(repeating: 0, count: segments.count)
        fd = try syscall("open") { open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) }
    }

    deinit { Glibc.close(fd) }

    /// Where the prefix's transfer stops.
    var prefixEnd: Int64 { lock.withLock { segments[0].end } }

    /// Connections open now.
    var active: Int { lock.withLock { (mainRunning ? 1 : 0) + running.count } }

    /// The segments as they stand (written, not necessarily durable).
    var table: [Segment] { lock.withLock { segments } }

    /// The segments were abandoned for an answer of another version.
    var abandoned: Bool { lock.withLock { abandonReason != nil } }

    /// Starts a fetch for every incomplete segment after the prefix.
    func start() {
        let indices = lock.withLock { segments.indices.dropFirst().filter { !segments[$0].isComplete } }
        for index in indices { launch(index) }
    }

    /// The prefix's transfer appended up to `length`; returns the bytes of the file written so far.
    func mainWrote(length: Int64) -> Int64 {
        lock.withLock {
            segments[0].next = length
            return writtenLocked
        }
    }

    /// The prefix's transfer ended: at the next segment's start (`atBoundary`), or cut at `length`.
    func mainEnded(_ result: Result<TransferSummary, TransferFailure>, atBoundary: Bool, length: Int64) {
        var takeOver = false
        var stop: TransferFailure?
        lock.withLock {
            mainRunning = false
            segments[0].next = atBoundary ? segments[0].end : length
            if case .failure(let cut) = result, !atBoundary, !segments[0].isComplete {
                if !stopping && Self.isTransient(cut.kind) && retries[0] < Self.retriesPerSegment {
                    retries[0] += 1
                    takeOver = true
                } else {
                    stop = cut
                }
            }
        }
        if let stop { stopAll(stop) }
        if takeOver { launch(0) } else { finishIfDone() }
    }

    /// A fetch wrote up to `next` (transfer thread): progress over all segments.
    func fetchWrote(_ index: Int, count: Int64, next: Int64) {
        guard let attempt, let core else { return }
        let now = core.clock.monotonic()
        let (written, due): (Int64, [Segment]?) = lock.withLock {
            segments[index].next = next
            unsynced += count
            guard !checkpointInFlight, !stopping,
                  unsynced >= checkpointBytes || now - lastCheckpoint >= checkpointSeconds else { return (writtenLocked, nil) }
            checkpointInFlight = true
            unsynced = 0
            lastCheckpoint = now
            return (writtenLocked, segments)
        }
        if let due {
            // Every byte of `due` is in the file (pwrite returned): a sync of it makes them durable.
            if let copy = try? syscall("fcntl", { fcntl(fd, F_DUPFD_CLOEXEC, 0) }) {
                core.checkpointSegments(attempt, descriptor: copy, table: due) { [weak self] in self?.checkpointEnded() }
            } else {
                lock.withLock { checkpointInFlight = false }
            }
        }
        core.attemptWrote(attempt, count: count, length: written, at: now)
    }

    func fetchEnded(_ fetch: SegmentFetch, _ result: Result<TransferSummary, TransferFailure>) {
        var again = false
        var stop: TransferFailure?
        lock.withLock {
            running[fetch.index] = nil
            let segment = segments[fetch.index]
            var cut: TransferFailure?
            switch result {
            case .success where segment.isComplete: break
            case .success: cut = TransferFailure(.connection, "a segment ended early")
            case .failure(let failure): cut = failure
            }
            guard let cut, !stopping else { return }
            if Self.isTransient(cut.kind) && retries[fetch.index] < Self.retriesPerSegment {
                retries[fetch.index] += 1
                again = true
            } else {
                stop = cut
            }
        }
        if let stop { stopAll(stop) }
        if again { launch(fetch.index) } else { finishIfDone() }
    }

    /// A segment's answer belongs to another version: everything stops; the download starts again.
    func abandon(_ reason: String) {
        lock.withLock {
            if abandonReason == nil { abandonReason = reason }
        }
        attempt?.refusal = .restart(reason)
        stopAll(TransferFailure(.rejected, reason))
    }

    /// A segment got a final status the prefix did not: the attempt ends as that answer (retried).
    func refuse(status: Int) {
        attempt?.refusal = .httpRetry(status: status, retryAfter: nil)
        stopAll(TransferFailure(.rejected, "a segment got HTTP \(status)"))
    }

    /// Stops every connection (pause, shutdown, an abandoned attempt).
    func cancel() {
        stopAll(TransferFailure(.cancelled, "cancelled"))
    }

    // MARK: Private

    private func checkpointEnded() {
        lock.withLock { checkpointInFlight = false }
    }

    private func stopAll(_ reason: TransferFailure) {
        let handles: [TransferHandle] = lock.withLock {
            stopLocked(reason)
            return Array(running.values)
        }
        attempt?.stopMain()
        for handle in handles { handle.cancel() }
    }

    private func launch(_ index: Int) {
        let (first, last, stop): (Int64, Int64, Bool) = lock.withLock {
            (segments[index].next, segments[index].end - 1, stopping)
        }
        guard !stop, first <= last else {
            finishIfDone()
            return
        }
        let fetch = SegmentFetch(index: index, first: first, last: last, crew: self, fd: fd)
        let request = SegmentFetch.request(from: template, first: first, last: last, validator: validator)
        lock.withLock { running[index] = PendingHandle() }
        let handle = driver.start(request, delegate: fetch)
        let cancelNow: Bool = lock.withLock {
            if running[index] is PendingHandle { running[index] = handle }
            return stopping
        }
        if cancelNow { handle.cancel() }
    }

    private func stopLocked(_ reason: TransferFailure) {
        if failure == nil { failure = reason }
        stopping = true
    }

    private var writtenLocked: Int64 {
        segments[0].start + segments.reduce(0) { $0 + ($1.next - $1.start) }
    }

    private func finishIfDone() {
        let outcome: Result<TransferSummary, TransferFailure>? = lock.withLock {
            guard !finished, !mainRunning, running.isEmpty else { return nil }
            finished = true
            if let failure { return .failure(failure) }
            guard segments.allSatisfy(\.isComplete) else {
                return .failure(TransferFailure(.connection, "segments ended incomplete"))
            }
            return .success(TransferSummary(head: head, bodyBytes: total - segments[0].start))
        }
        if let outcome { attempt?.crewFinished(outcome) }
    }

    private static func isTransient(_ kind: TransferFailure.Kind) -> Bool {
        if case .retry = RetryPolicy.classify(kind) { return true }
        return false
    }

    /// Holds a fetch's place between its launch and its handle (a stop meanwhile cancels it later).
    private struct PendingHandle: TransferHandle {
        func cancel() {}
    }
}
