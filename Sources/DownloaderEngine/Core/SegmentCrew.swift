import Basics
import Foundation
import Glibc

/// The connections of one segmented attempt. The file is cut in pieces (`SegmentPlanner.pieces`),
/// handed out in file order to at most `connections` connections at once (`PieceBook`). Piece 0
/// (the prefix) is the attempt's own transfer, appended to the partial and hashed as it arrives; it
/// runs on through the pieces after it that nobody has (`extendPrefix`) and stops where another
/// connection's piece begins. Every other piece is a `SegmentFetch` writing in place; a connection
/// that finished its piece takes the next one nobody has. How many connections are open is
/// `ConnectionProbe`'s to say: one, then a probe, then all of them only when the probe brought more
/// bytes per second. Once the attempt's own transfer ended, `CrewHashing` reads back and hashes the
/// pieces written after the prefix in file order as the contiguous prefix grows, so little is left
/// to hash after the last byte, and readers see that prefix. The pieces' writes are checkpointed
/// (synced, then journaled) as `CheckpointPacing` says.
///
/// A fetch cut or answered with a transient status asks again from where it stood (at most
/// `CrewRoster.retriesPerSegment` times per piece); so does the prefix when its own transfer is cut (a fetch
/// takes it over). Any answer from another version abandons all pieces (the attempt ends refused
/// with `.restart`: the download starts again from 0 on one connection). The attempt ends
/// (`Attempt.crewFinished`) once its own transfer, every fetch and the hashing stopped:
/// successfully when every piece is complete.
///
/// Threads: transfer callbacks come on the transfer thread; the fetches' writes, and what follows
/// them (`fetchWrote`, `fetchEnded`), on the writer queue; `cancel` from any thread; the hashing
/// runs on a queue of its own. The state is under `lock`, never held while calling out.
final class SegmentCrew: @unchecked Sendable {
    let total: Int64
    let validator: Validator
    private weak var attempt: Attempt?
    private weak var core: EngineCore?
    private let driver: TransferStarting
    private let template: TransferRequest
    private let head: ResponseHead
    /// The partial, opened for the fetches' in-place writes, and the queue they are written on.
    private let writes: InPlaceWrites
    private let writer = DispatchQueue(label: "segments.write")
    /// Cluster mode: the lease the download is held under (every fetch's write checks it).
    private let lease: LeaseHold?
    private let clock: EngineClock
    /// How each fetch gathers its bytes before writing them, and the buffers it gathers them in.
    private let batching: WriteBatching
    let buffers: GatherBuffers

    private let lock = NSLock()
    // Guarded by `lock`.
    private var roster: CrewRoster
    private var failure: TransferFailure?
    private var finished = false
    private(set) var abandonReason: String?
    private var connectionRefused = false
    /// The hashing, once the attempt's own transfer ended (until then the partial hashes as it appends).
    private var hashing: CrewHashing?
    private var checkpoints: CheckpointPacing

    /// Opens the partial at `path` for the fetches' in-place writes (`write` stands in for pwrite(2)).
    init(attempt: Attempt, core: EngineCore, driver: TransferStarting, template: TransferRequest, head: ResponseHead,
         validator: Validator, total: Int64, segments: [Segment], connections: Int, path: String,
         write: InPlaceWrites.PositionedWrite? = nil,
         checkpoint: (bytes: Int64, seconds: Double), probeWindow: Double = 0,
         batching: WriteBatching = WriteBatching()) throws(SystemError) {
        checkpoints = CheckpointPacing(bytes: checkpoint.bytes, seconds: checkpoint.seconds, now: core.clock.monotonic())
        self.attempt = attempt
        self.core = core
        lease = attempt.lease
        self.driver = driver
        self.template = template
        self.head = head
        self.validator = validator
        self.total = total
        roster = CrewRoster(pieces: PieceBook(segments: segments, total: total), connections: connections,
                            probe: ConnectionProbe(window: probeWindow))
        clock = core.clock
        self.batching = batching
        // A buffer gathering and one being written per connection, and those the hashing holds.
        buffers = GatherBuffers(capacity: batching.capacity, keep: 2 * max(1, connections) + CrewHashing.maxLanded)
        writes = try InPlaceWrites(path: path, call: write)
    }

    /// Where the prefix's transfer stops.
    var prefixEnd: Int64 { lock.withLock { roster.pieces.prefixEnd } }

    /// Connections open now.
    var active: Int { lock.withLock { roster.active } }

    /// Bytes after the hashed prefix an attempt that stops short reads back and hashes as it
    /// settles (`EngineCore.keepContiguous`): what it keeps instead of fetching again, bounded so
    /// that a pause stays quick.
    static let keptAtSettle: Int64 = 64 << 20

    /// The pieces as they stand (written, not necessarily durable).
    var table: [Segment] { lock.withLock { roster.pieces.segments } }

    /// The pieces were abandoned for an answer of another version.
    var abandoned: Bool { lock.withLock { abandonReason != nil } }

    /// The origin refused a connection beside the first (`refuse`): the download keeps its pieces
    /// but goes on with one connection.
    var refusedConnections: Bool { lock.withLock { connectionRefused } }

    /// Starts a fetch for the first pieces after the prefix, one per connection beside it that the
    /// probe allows now (none while the prefix's connection runs alone).
    func start() {
        for index in lock.withLock({ roster.open() }) { launch(index) }
    }

    /// The prefix's transfer appended up to `length` at `now`; returns the bytes of the file written
    /// so far. Opens the connections the probe asks for.
    func mainWrote(length: Int64, at now: Double) -> Int64 {
        let (written, launches, verdict) = lock.withLock {
            roster.pieces.advance(0, to: length)
            let launches = roster.probeStep(now)
            return (roster.pieces.written, launches, roster.takeVerdict())
        }
        for index in launches { launch(index) }
        tell(verdict)
        return written
    }

    /// The probe's decision, when one was just made (taken under the lock), goes into the
    /// download's story.
    private func tell(_ decided: (verdict: ConnectionProbe.Verdict, connections: Int)?) {
        guard let decided, let attempt, let core else { return }
        core.connectionsDecided(attempt, decided.verdict, connections: decided.connections)
    }

    /// The prefix's transfer reached its end: when the next piece with bytes is nobody's and none
    /// of it is written, the prefix takes it over (its transfer runs on instead of a new ranged
    /// request, and its bytes are hashed as they arrive instead of read back) and the new end is
    /// returned. nil: the prefix stops here.
    func extendPrefix() -> Int64? {
        lock.withLock { roster.stopping ? nil : roster.pieces.extendPrefix() }
    }

    /// The prefix's transfer ended: at the next piece's start (`atBoundary`), or cut at `length`.
    /// From now on the crew hashes `partial` as the contiguous prefix grows.
    func mainEnded(_ result: Result<TransferSummary, TransferFailure>, atBoundary: Bool, partial: PartialFile?) {
        let length = partial?.length ?? 0
        var cut: TransferFailure?
        switch result {
        case .failure(let failure) where !atBoundary: cut = failure
        // A whole answer short of the prefix's end (a capped range): a fetch takes the rest over.
        case .success where !atBoundary: cut = TransferFailure(.connection, "the prefix's answer ended short of its piece")
        default: break
        }
        let (launches, stop, started): ([Int], TransferFailure?, CrewHashing?) = lock.withLock {
            roster.pieces.advance(0, to: atBoundary ? roster.pieces.prefixEnd : length)
            let (launches, stop) = roster.mainEnded(cut: cut)
            guard let partial, stop == nil, !roster.stopping else { return (launches, stop, nil) }
            // The attempt's partial is the hashing's until the attempt ends.
            hashing = CrewHashing(partial: partial, absorbed: length, target: roster.pieces.contiguous, total: total,
                                  flushed: { [weak attempt, weak core] length in
                                      if let attempt, let core { core.attemptFlushed(attempt, length: length) }
                                  },
                                  finished: { [weak attempt] outcome in attempt?.crewFinished(outcome) },
                                  giveBack: { [buffers] in buffers.giveBack($0) })
            return (launches, nil, hashing)
        }
        started?.start()
        if let stop { stopAll(stop) }
        // The prefix's piece taken over after a stall goes on over a new connection (`fetchEnded`).
        for index in launches { launch(index, freshConnection: index == 0 && cut?.kind == .stalled) }
        finishIfDone()
        shareSpeed()
    }

    /// Before a fetch's write (writer queue): refused, and the lease stopped, once the lease may
    /// no longer write (`EngineCore.checkWrite`), exactly as the prefix's writes.
    func checkWrite() throws(SystemError) {
        try core?.checkWrite(under: lease)
    }

    /// A fetch wrote `count` bytes up to `next` (writer queue), from `buffer` (where they start at
    /// `skip`): progress over all pieces, and a checkpoint when due. True when the hashing took
    /// `buffer` (the bytes landed where the contiguous prefix ended: hashed from it instead of read
    /// back).
    func fetchWrote(_ index: Int, count: Int64, next: Int64, from buffer: UnsafeMutableRawBufferPointer? = nil, skip: Int = 0) -> Bool {
        guard let attempt, let core else { return false }
        let now = core.clock.monotonic()
        let (written, due, launches, hashing, front, contiguous, verdict) = lock.withLock {
            let front = self.hashing != nil && roster.pieces.contiguous == next - count
            let launches = roster.fetchWrote(index, count: count, next: next, at: now)
            let due = checkpoints.wrote(count, at: now, stopping: roster.stopping) ? roster.pieces.segments : nil
            return (roster.pieces.written, due, launches, self.hashing, front, self.hashing == nil ? 0 : roster.pieces.contiguous,
                    roster.takeVerdict())
        }
        var taken = false
        if front, let buffer, let hashing { taken = hashing.landed(buffer, skip: skip, count: Int(count), at: next - count) }
        hashing?.grew(to: contiguous)
        for index in launches { launch(index) }
        tell(verdict)
        if let due {
            // Every byte of `due` is in the file (pwrite returned): a sync of it makes them durable.
            if let copy = FileStore.descriptorForSync(writes.descriptor) {
                core.checkpointSegments(attempt, descriptor: copy, table: due) { [weak self] in self?.checkpointEnded() }
            } else {
                checkpointEnded()
            }
        }
        core.attemptWrote(attempt, count: count, length: written, at: now)
        return taken
    }

    func fetchEnded(_ fetch: SegmentFetch, _ result: Result<TransferSummary, TransferFailure>) {
        let (again, stop) = lock.withLock { roster.fetchEnded(fetch.index, result) }
        if let stop { stopAll(stop) }
        // A piece cut for a stall (or `--min-speed`) goes on over a new connection, as the attempt
        // after a stall does: HTTP/2 would carry it on the one that stalled.
        let stalled = if case .failure(let failure) = result { failure.kind == .stalled } else { false }
        if let again { launch(again, freshConnection: stalled) } else { finishIfDone() }
        shareSpeed()
    }

    /// `--min-speed` is shared by the connections open now: each brings its part.
    private func shareSpeed() {
        template.speedShare?.set(lock.withLock { roster.active })
    }

    /// A piece's answer belongs to another version: everything stops; the download starts again.
    func abandon(_ reason: String) {
        lock.withLock {
            if abandonReason == nil { abandonReason = reason }
        }
        attempt?.refusal = .restart(reason)
        stopAll(TransferFailure(.rejected, reason))
    }

    /// A piece got an answer refusing its connection (one the prefix did not get): the attempt ends
    /// as a retry after `retryAfter`, its pieces kept, and the download goes on with one connection.
    func refuse(status: Int, retryAfter: String?) {
        lock.withLock { connectionRefused = true }
        attempt?.refusal = .httpRetry(status: status, retryAfter: retryAfter)
        stopAll(TransferFailure(.rejected, "a segment got HTTP \(status)"))
    }

    /// Stops every connection (pause, shutdown, an abandoned attempt).
    func cancel() {
        stopAll(TransferFailure(.cancelled, "cancelled"))
    }

    // MARK: Private

    private func checkpointEnded() {
        lock.withLock { checkpoints.ended() }
    }

    private func stopAll(_ reason: TransferFailure) {
        let (handles, hashing): ([SegmentSlot], CrewHashing?) = lock.withLock {
            if failure == nil { failure = reason }
            roster.stop()
            return (Array(roster.running.values), self.hashing)
        }
        hashing?.stop()
        attempt?.stopMain()
        for handle in handles { handle.cancel() }
    }

    /// Starts the fetch of piece `index`, whose place in `running` was taken under the lock that
    /// decided it (so that no moment shows every connection ended while one is about to start).
    private func launch(_ index: Int, freshConnection: Bool = false) {
        let (first, last, stop, slot): (Int64, Int64, Bool, SegmentSlot) = lock.withLock {
            let slot = roster.hold(index)
            return (roster.pieces.segments[index].next, roster.pieces.segments[index].end - 1, roster.stopping, slot)
        }
        guard !stop, first <= last else {
            lock.withLock { roster.release(index) }
            finishIfDone()
            return
        }
        let clock = clock
        let fetch = SegmentFetch(index: index, first: first, last: last, crew: self, writes: writes, writer: writer,
                                 batching: batching, monotonic: { clock.monotonic() })
        var request = SegmentFetch.request(from: template, first: first, last: last, validator: validator)
        if freshConnection { request.freshConnection = true }
        shareSpeed()
        slot.started(driver.start(request, delegate: fetch))
    }

    private func finishIfDone() {
        let (outcome, hashing, contiguous): (Result<TransferSummary, TransferFailure>?, CrewHashing?, Int64) = lock.withLock {
            guard !finished, roster.idle else { return (nil, nil, 0) }
            finished = true
            let outcome: Result<TransferSummary, TransferFailure>
            if let failure {
                outcome = .failure(failure)
            } else if roster.pieces.allComplete {
                outcome = .success(TransferSummary(head: head, bodyBytes: total - roster.pieces.segments[0].start))
            } else {
                outcome = .failure(TransferFailure(.connection, "segments ended incomplete"))
            }
            return (outcome, self.hashing, roster.pieces.contiguous)
        }
        guard let outcome else { return }
        if let hashing {
            hashing.finish(outcome, contiguous: contiguous)  // The hashing ends the attempt once it stopped.
        } else {
            attempt?.crewFinished(outcome)
        }
    }
}
