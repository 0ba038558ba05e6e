import Basics
import Foundation
import Glibc

/// The connections of one segmented attempt. The file is cut in pieces (`SegmentPlanner.pieces`),
/// handed out in file order to at most `connections` connections at once. Piece 0 (the prefix) is
/// the attempt's own transfer, appended to the partial and hashed as it arrives; it runs on through
/// the pieces after it that nobody has (`extendPrefix`) and stops where another connection's piece
/// begins. Every other piece is a `SegmentFetch` writing in place; a connection that finished its
/// piece takes the next one nobody has. How many connections are open is `ConnectionProbe`'s to
/// say: one, then a probe, then all of them only when the probe brought more bytes per second. Once the attempt's own transfer ended, the
/// pieces written after the prefix are read back and hashed in file order as the contiguous prefix
/// grows (`absorb`), so little is left to hash after the last byte, and readers see that prefix.
///
/// A fetch cut or answered with a transient status asks again from where it stood (at most
/// `retriesPerSegment` times per piece); so does the prefix when its own transfer is cut (a fetch
/// takes it over). Any answer from another version abandons all pieces (the attempt ends refused
/// with `.restart`: the download starts again from 0 on one connection). The attempt ends
/// (`Attempt.crewFinished`) once its own transfer, every fetch and the hashing stopped:
/// successfully when every piece is complete.
///
/// Threads: fetch and transfer callbacks come on the transfer thread; `cancel` from any thread; the
/// hashing runs on a queue of its own. The state is under `lock`, never held while calling out.
final class SegmentCrew: @unchecked Sendable {
    static let retriesPerSegment = 3
    /// The hashing waits for at least this many contiguous bytes (or the end).
    static let absorbStep: Int64 = 1 << 20

    let total: Int64
    let validator: Validator
    private weak var attempt: Attempt?
    private weak var core: EngineCore?
    private let driver: TransferStarting
    private let template: TransferRequest
    private let head: ResponseHead
    private let fd: Int32
    private let connections: Int
    /// Cluster mode: the lease the download is held under (every fetch's write checks it).
    private let lease: LeaseHold?
    private let clock: EngineClock
    /// How each fetch gathers its bytes before writing them.
    private let batching: WriteBatching
    private let absorbQueue = DispatchQueue(label: "segments.absorb")

    private let lock = NSCondition()
    // Guarded by `lock`.
    private var segments: [Segment]
    /// `segments.writtenBytes`, kept as the pieces advance (`advanceLocked`).
    private var writtenLocked: Int64
    private var assigned: [Bool]
    /// The connections after the prefix, by piece: held from the decision to fetch a piece until
    /// its fetch ended.
    private var running: [Int: Slot] = [:]
    private var retries: [Int]
    private var mainRunning = true
    private var stopping = false
    private var failure: TransferFailure?
    private var finished = false
    private(set) var abandonReason: String?
    /// The hashing: running, how far it got, and the attempt's end waiting for it to stop.
    private var absorbing = false
    private var absorbed: Int64 = 0
    private var pendingOutcome: Result<TransferSummary, TransferFailure>?
    /// Checkpoints of the pieces after the prefix (`EngineCore.checkpointSegments`): every
    /// `checkpointBytes` or `checkpointSeconds` of their writing, one at a time.
    private let checkpointBytes: Int64
    private let checkpointSeconds: Double
    private var lastCheckpoint: Double
    private var unsynced: Int64 = 0
    private var checkpointInFlight = false
    /// Whether more connections pay, and the probe's piece while it measures.
    private var probe: ConnectionProbe
    private var probeIndex: Int?
    /// Gathering buffers of ended fetches, for the next ones (at most one per connection): a new
    /// fetch every 8 MiB would otherwise fault a fresh megabyte in each time.
    private var spareBuffers: [UnsafeMutableRawBufferPointer] = []

    /// Opens the partial at `path` for the fetches' in-place writes.
    init(attempt: Attempt, core: EngineCore, driver: TransferStarting, template: TransferRequest, head: ResponseHead,
         validator: Validator, total: Int64, segments: [Segment], connections: Int, path: String,
         checkpoint: (bytes: Int64, seconds: Double), probeWindow: Double = 0,
         batching: WriteBatching = WriteBatching()) throws(SystemError) {
        checkpointBytes = max(1, checkpoint.bytes)
        checkpointSeconds = max(0, checkpoint.seconds)
        lastCheckpoint = core.clock.monotonic()
        self.attempt = attempt
        self.core = core
        lease = attempt.lease
        self.driver = driver
        self.template = template
        self.head = head
        self.validator = validator
        self.total = total
        self.segments = segments
        writtenLocked = segments.writtenBytes
        self.connections = max(1, connections)
        clock = core.clock
        self.batching = batching
        probe = ConnectionProbe(window: probeWindow)
        assigned = segments.indices.map { $0 == 0 || segments[$0].isComplete }
        retries = Array(repeating: 0, count: segments.count)
        fd = try syscall("open") { open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) }
    }

    deinit {
        Glibc.close(fd)
        for buffer in spareBuffers { buffer.deallocate() }
    }

    /// A gathering buffer of `batching.capacity` bytes for a fetch (given back when it ends).
    func takeBuffer() -> UnsafeMutableRawBufferPointer {
        lock.withLock { spareBuffers.popLast() }
            ?? UnsafeMutableRawBufferPointer.allocate(byteCount: batching.capacity, alignment: 4096)
    }

    func giveBack(_ buffer: UnsafeMutableRawBufferPointer) {
        let kept = lock.withLock {
            guard spareBuffers.count < connections else { return false }
            spareBuffers.append(buffer)
            return true
        }
        if !kept { buffer.deallocate() }
    }

    /// Where the prefix's transfer stops.
    var prefixEnd: Int64 { lock.withLock { segments[0].end } }

    /// Connections open now.
    var active: Int { lock.withLock { activeLocked } }

    /// The pieces as they stand (written, not necessarily durable).
    var table: [Segment] { lock.withLock { segments } }

    /// The pieces were abandoned for an answer of another version.
    var abandoned: Bool { lock.withLock { abandonReason != nil } }

    /// Starts a fetch for the first pieces after the prefix, one per connection beside it that the
    /// probe allows now (none while the prefix's connection runs alone).
    func start() {
        for index in lock.withLock({ openLocked() }) { launch(index) }
    }

    /// The prefix's transfer appended up to `length` at `now`; returns the bytes of the file written
    /// so far. Opens the connections the probe asks for.
    func mainWrote(length: Int64, at now: Double) -> Int64 {
        let (written, launches): (Int64, [Int]) = lock.withLock {
            advanceLocked(0, to: length)
            return (writtenLocked, probeStepLocked(now))
        }
        for index in launches { launch(index) }
        return written
    }

    /// The prefix's transfer reached its end: when the next piece with bytes is nobody's and none
    /// of it is written, the prefix takes it over (its transfer runs on instead of a new ranged
    /// request, and its bytes are hashed as they arrive instead of read back) and the new end is
    /// returned; the piece stays in the table, empty, at the new end. nil: the prefix stops here.
    func extendPrefix() -> Int64? {
        lock.withLock {
            let end = segments[0].end
            guard !stopping, let index = segments.indices.dropFirst().first(where: { segments[$0].end > end }),
                  !assigned[index], segments[index].start == end, segments[index].next == end else { return nil }
            let further = segments[index].end
            assigned[index] = true
            segments[0].end = further
            segments[index] = Segment(start: further, end: further)
            return further
        }
    }

    /// The prefix's transfer ended: at the next piece's start (`atBoundary`), or cut at `length`.
    /// From now on the crew hashes `partial` as the contiguous prefix grows.
    func mainEnded(_ result: Result<TransferSummary, TransferFailure>, atBoundary: Bool, partial: PartialFile?) {
        let length = partial?.length ?? 0
        var launches: [Int] = []
        var stop: TransferFailure?
        lock.withLock {
            mainRunning = false
            absorbed = length
            advanceLocked(0, to: atBoundary ? segments[0].end : length)
            if case .failure(let cut) = result, !atBoundary, !segments[0].isComplete {
                if !stopping && Self.isTransient(cut.kind) && retries[0] < Self.retriesPerSegment {
                    retries[0] += 1
                    running[0] = Slot()
                    launches.append(0)  // A fetch takes the prefix over.
                } else {
                    stop = cut
                }
            } else if activeLocked < probe.allowed(granted: connections), let next = claimLocked() {
                launches.append(next)  // The prefix's connection is free: the next piece.
            }
            if partial != nil, stop == nil, !stopping {
                absorbing = true
                absorbQueue.async { self.absorb() }  // The attempt's partial is the hashing's until the attempt ends.
            }
        }
        if let stop { stopAll(stop) }
        for index in launches { launch(index) }
        finishIfDone()
    }

    /// Before a fetch's write (transfer thread): refused, and the lease stopped, once the lease may
    /// no longer write (`EngineCore.checkWrite`), exactly as the prefix's writes.
    func checkWrite() throws(SystemError) {
        try core?.checkWrite(under: lease)
    }

    /// A fetch wrote up to `next` (transfer thread): progress over all pieces, and a checkpoint when due.
    func fetchWrote(_ index: Int, count: Int64, next: Int64) {
        guard let attempt, let core else { return }
        let now = core.clock.monotonic()
        let (written, due, launches): (Int64, [Segment]?, [Int]) = lock.withLock {
            advanceLocked(index, to: next)
            unsynced += count
            if absorbing { lock.signal() }
            if index == probeIndex { probe.probeBegan(written: writtenLocked - count, at: now) }
            let launches = probeStepLocked(now)
            guard !checkpointInFlight, !stopping,
                  unsynced >= checkpointBytes || now - lastCheckpoint >= checkpointSeconds else { return (writtenLocked, nil, launches) }
            checkpointInFlight = true
            unsynced = 0
            lastCheckpoint = now
            return (writtenLocked, segments, launches)
        }
        for index in launches { launch(index) }
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
        var again: Int?
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
            guard !stopping else { return }
            guard let cut else {
                if fetch.index == probeIndex && probe.measuring {
                    again = claimLastLocked()  // The probe measures on, from the end of the file.
                    probeIndex = again
                } else if activeLocked < probe.allowed(granted: connections) {
                    again = claimLocked()  // This connection takes the next piece nobody has.
                }
                return
            }
            if Self.isTransient(cut.kind) && retries[fetch.index] < Self.retriesPerSegment {
                retries[fetch.index] += 1
                running[fetch.index] = Slot()
                again = fetch.index
            } else {
                stop = cut
            }
        }
        if let stop { stopAll(stop) }
        if let again { launch(again) } else { finishIfDone() }
    }

    /// A piece's answer belongs to another version: everything stops; the download starts again.
    func abandon(_ reason: String) {
        lock.withLock {
            if abandonReason == nil { abandonReason = reason }
        }
        attempt?.refusal = .restart(reason)
        stopAll(TransferFailure(.rejected, reason))
    }

    /// A piece got a final status the prefix did not: the attempt ends as that answer (retried).
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
        let handles: [Slot] = lock.withLock {
            if failure == nil { failure = reason }
            stopping = true
            lock.broadcast()
            return Array(running.values)
        }
        attempt?.stopMain()
        for handle in handles { handle.cancel() }
    }

    /// Starts the fetch of piece `index`, whose place in `running` was taken under the lock that
    /// decided it (so that no moment shows every connection ended while one is about to start).
    private func launch(_ index: Int) {
        let (first, last, stop, slot): (Int64, Int64, Bool, Slot) = lock.withLock {
            let slot = running[index] ?? Slot()
            running[index] = slot
            return (segments[index].next, segments[index].end - 1, stopping, slot)
        }
        guard !stop, first <= last else {
            lock.withLock { running[index] = nil }
            finishIfDone()
            return
        }
        let clock = clock
        let fetch = SegmentFetch(index: index, first: first, last: last, crew: self, fd: fd, batching: batching,
                                 monotonic: { clock.monotonic() })
        let request = SegmentFetch.request(from: template, first: first, last: last, validator: validator)
        slot.started(driver.start(request, delegate: fetch))
    }

    /// Under `lock`: the first piece nobody has, now taken and its place in `running` held (nil
    /// when none is left or everything stops).
    private func claimLocked() -> Int? {
        guard !stopping, let index = assigned.firstIndex(of: false) else { return nil }
        assigned[index] = true
        running[index] = Slot()
        return index
    }

    /// Under `lock`: piece `index` is written up to `next`; keeps `writtenLocked` (every write
    /// asks for it: summed over the pieces each time, it cost more than the crew's other work).
    private func advanceLocked(_ index: Int, to next: Int64) {
        writtenLocked += next - segments[index].next
        segments[index].next = next
    }

    private var activeLocked: Int { (mainRunning ? 1 : 0) + running.count }

    /// Under `lock`: the last piece nobody has, now taken (the probe's).
    private func claimLastLocked() -> Int? {
        guard !stopping, let index = assigned.lastIndex(of: false) else { return nil }
        assigned[index] = true
        running[index] = Slot()
        return index
    }

    /// Under `lock`: pieces for as many more connections as the probe allows now, taken.
    private func openLocked() -> [Int] {
        var indices: [Int] = []
        while activeLocked < probe.allowed(granted: connections), let index = claimLocked() { indices.append(index) }
        return indices
    }

    /// Under `lock`: tells the probe the bytes written by `now`; the pieces to launch that it asks for.
    private func probeStepLocked(_ now: Double) -> [Int] {
        switch probe.observe(written: writtenLocked, at: now, remaining: total - writtenLocked) {
        case .none:
            return []
        case .openProbe:
            probeIndex = claimLastLocked()
            return probeIndex.map { [$0] } ?? []
        case .openAll:
            return openLocked()
        }
    }

    /// Under `lock`: where the bytes written from the file's start without a gap end.
    private var contiguousLocked: Int64 {
        for segment in segments where !segment.isComplete { return segment.next }
        return total
    }

    /// The hashing queue: reads back and hashes the contiguous prefix as it grows, at least
    /// `absorbStep` at a time; tells readers each new length; stops once the attempt's connections
    /// all ended (after hashing up to the end when every piece is complete), then ends the attempt.
    private func absorb() {
        let partial = attempt?.partial
        var failed = partial == nil
        lock.lock()
        while true {
            let target = contiguousLocked
            let due = target - absorbed >= Self.absorbStep || target == total || pendingOutcome != nil
            if !failed && !stopping && target > absorbed && due {
                lock.unlock()
                do throws(SystemError) {
                    try partial?.absorb(upTo: target)
                    if let attempt, let core { core.attemptFlushed(attempt, length: target) }
                } catch {
                    failed = true  // Settling tries again, and reports the disk's failure.
                }
                lock.lock()
                if !failed { absorbed = target }
                continue
            }
            if let outcome = pendingOutcome {  // Every connection ended and nothing is left worth hashing.
                pendingOutcome = nil
                absorbing = false
                lock.unlock()
                attempt?.crewFinished(outcome)
                return
            }
            lock.wait()
        }
    }

    private func finishIfDone() {
        let outcome: Result<TransferSummary, TransferFailure>? = lock.withLock {
            guard !finished, !mainRunning, running.isEmpty else { return nil }
            finished = true
            let outcome: Result<TransferSummary, TransferFailure>
            if let failure {
                outcome = .failure(failure)
            } else if segments.allSatisfy(\.isComplete) {
                outcome = .success(TransferSummary(head: head, bodyBytes: total - segments[0].start))
            } else {
                outcome = .failure(TransferFailure(.connection, "segments ended incomplete"))
            }
            guard absorbing else { return outcome }
            pendingOutcome = outcome  // The hashing ends the attempt once it stopped.
            lock.broadcast()
            return nil
        }
        if let outcome { attempt?.crewFinished(outcome) }
    }

    private static func isTransient(_ kind: TransferFailure.Kind) -> Bool {
        if case .retry = RetryPolicy.classify(kind) { return true }
        return false
    }

    /// A fetch's place: its handle once started; a cancel before that cancels it as it starts.
    private final class Slot: @unchecked Sendable {
        private let lock = NSLock()
        private var handle: TransferHandle?
        private var cancelled = false

        func started(_ handle: TransferHandle) {
            let cancelNow = lock.withLock {
                self.handle = handle
                return cancelled
            }
            if cancelNow { handle.cancel() }
        }

        func cancel() {
            lock.withLock {
                cancelled = true
                return handle
            }?.cancel()
        }
    }
}
