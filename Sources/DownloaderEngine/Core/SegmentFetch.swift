import Basics
import Foundation
import Glibc

/// One ranged request of a segmented attempt: `Range: bytes=first-last` with `If-Range`, its body
/// gathered on the transfer thread into buffers (`WriteBatching`: libcurl's 16 KiB pieces become
/// 1 MiB writes), each written in place at the segment's next byte on the crew's writer queue
/// (`InPlaceWrites`: whole blocks direct, which waits for the device; the transfer thread, shared
/// by every download's connections, does not) and counted by the crew once written. One buffer
/// of a fetch is written at a time: the next flush waits for the one before (only while the
/// crew's writer is behind the fetch's connection: the disk's back-pressure, as before), and a
/// failed write ends the fetch at its next flush. Whatever is gathered is written when the
/// transfer ends, however it ends, and the crew hears of the end after the last write.
/// Its head is judged by `SegmentPlanner.judgeSegment`; what it means for the attempt is the
/// crew's to decide.
final class SegmentFetch: TransferDelegate, BodySink, @unchecked Sendable {
    let index: Int
    let first: Int64
    let last: Int64
    /// Held while the fetch runs, let go once it ended (after its last write): the crew's buffers
    /// and hashing stay until then, whatever else let the attempt go (a download removed while its
    /// first connection was still being started, say). Transfer thread, then the writer queue
    /// once the transfer ended.
    private(set) var crew: SegmentCrew?
    /// The crew's descriptors: held by every fetch, so they stay open until the last one ended.
    private let writes: InPlaceWrites
    /// The crew's writer queue (serial), and this fetch's write in flight there (at most one).
    private let writer: DispatchQueue
    private let inFlight = DispatchSemaphore(value: 1)
    /// The first write that failed (set on the writer queue before `inFlight` is signalled; read
    /// after waiting for it, or on the writer queue).
    private var failure: SystemError?
    private let batching: WriteBatching
    /// Bytes a gathering buffer holds (the crew's `GatherBuffers.capacity`).
    private let bufferSize: Int
    private let monotonic: @Sendable () -> Double
    // Transfer thread.
    /// The file offset of the next byte gathered (those before are written or being written).
    private var next: Int64
    /// The last byte the answer's `Content-Range` covers (at most `last`: an origin may cap it).
    private var end: Int64
    /// Gathered bytes (the crew's buffer, taken at the first body byte), how many, and since when.
    private var buffer: UnsafeMutableRawBufferPointer?
    private var held = 0
    private var heldSince: Double = 0
    /// Where the gathered bytes start in `buffer`: the first one's place in its block of the file,
    /// so that every byte sits at the same place in a block of memory as in the file, and whole
    /// blocks can go direct (`DirectIO`) whatever offset a fetch resumed at.
    private var skip = 0

    init(index: Int, first: Int64, last: Int64, crew: SegmentCrew, writes: InPlaceWrites, writer: DispatchQueue,
         batching: WriteBatching, monotonic: @escaping @Sendable () -> Double) {
        self.index = index
        self.first = first
        self.last = last
        self.crew = crew
        self.writes = writes
        self.writer = writer
        bufferSize = batching.capacity
        // Never more than the range holds.
        self.batching = WriteBatching(capacity: Int(min(Int64(batching.capacity), last - first + 1)), maxHold: batching.maxHold)
        self.monotonic = monotonic
        next = first
        end = last
    }

    deinit { buffer?.deallocate() }  // Ended without its crew (never expected).

    /// The request for this range: the attempt's own, with the range and the validator.
    static func request(from template: TransferRequest, first: Int64, last: Int64, validator: Validator) -> TransferRequest {
        var request = template
        request.headers = template.headers.filter { $0.name.lowercased() != "range" && $0.name.lowercased() != "if-range" }
        request.headers.append(("Range", "bytes=\(first)-\(last)"))
        request.headers.append(("If-Range", validator.ifRange ?? ""))
        request.maxBodyBytes = last - first + 1
        return request
    }

    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure> {
        guard let crew else { return .failure(TransferFailure(.rejected, "the attempt is gone")) }
        let verdict = SegmentPlanner.judgeSegment(head, first: first, last: last, total: crew.total, validator: crew.validator)
        switch verdict {
        case .accept:
            end = ContentRange.parse(head.value("content-range") ?? "")?.last ?? last
            return .success(self)
        case .abandon(let reason):
            crew.abandon(reason)
            return .failure(TransferFailure(.rejected, reason))
        case .retry(let status):
            return .failure(TransferFailure(.connection, "a segment got HTTP \(status)"))
        case .refuse(let status, let retryAfter):
            crew.refuse(status: status, retryAfter: retryAfter)
            return .failure(TransferFailure(.rejected, "a segment got HTTP \(status)"))
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard next + Int64(held) + Int64(bytes.count) <= end + 1 else {
            // More than the range it names: not bytes of a known place. Nothing of it is written.
            crew?.abandon("a segment's body is longer than its Content-Range \(first)-\(end)")
            throw SystemError(errno: EINVAL, function: "pwrite (past the segment's range)")
        }
        let now = monotonic()
        var done = 0
        while done < bytes.count {
            if held == 0 { skip = Self.skip(at: next, bufferSize: bufferSize) }
            let plan = batching.plan(held: held, incoming: bytes.count - done, heldFor: now - heldSince, room: bufferSize - skip)
            if plan.gather > 0 {
                guard let gather = buffer ?? crew?.buffers.take() else {
                    throw SystemError(errno: EBADF, function: "write (the attempt is gone)")
                }
                buffer = gather
                if held == 0 { heldSince = now }
                (gather.baseAddress! + skip + held).copyMemory(from: base + done, byteCount: plan.gather)
                held += plan.gather
                done += plan.gather
            }
            if plan.flush { try flush() }
        }
    }

    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>) {
        var result = result
        do throws(SystemError) {
            try flush()
        } catch {
            result = Self.ended(result, writeFailure: error)
        }
        if let buffer {
            if let crew { crew.buffers.giveBack(buffer) } else { buffer.deallocate() }
        }
        buffer = nil
        let outcome = result
        writer.async { [self] in  // After this fetch's last write (the queue is serial).
            var result = outcome
            if let failure { result = Self.ended(result, writeFailure: failure) }
            let crew = self.crew
            self.crew = nil
            crew?.fetchEnded(self, result)
        }
    }

    /// A failed write is the fetch's outcome, whatever else ended its transfer (a cut would be
    /// retried from where the piece stood, into the same failing disk), but for a cancel: the
    /// crew is stopping anyway.
    static func ended(_ result: Result<TransferSummary, TransferFailure>, writeFailure error: SystemError)
        -> Result<TransferSummary, TransferFailure> {
        if case .failure(let failure) = result, failure.kind == .cancelled { return result }
        return .failure(TransferFailure(.disk, "writing the body failed: \(error)", code: error.errno))
    }

    /// Hands the gathered bytes to the writer queue, once this fetch's previous write ended; the
    /// next bytes are gathered in another buffer. Throws the previous write's failure instead (the
    /// bytes of this one are dropped: the fetch ends, its piece counted as far as it was written).
    private func flush() throws(SystemError) {
        guard let gathered = buffer, held > 0 else { return }
        let (count, skip, at) = (held, skip, next)
        held = 0
        self.buffer = nil
        inFlight.wait()
        guard failure == nil, let crew else {
            inFlight.signal()
            if let crew { crew.buffers.giveBack(gathered) } else { gathered.deallocate() }
            throw failure ?? SystemError(errno: EBADF, function: "write (the attempt is gone)")
        }
        next += Int64(count)
        nonisolated(unsafe) let buffer = gathered  // The writer's alone from here.
        writer.async { [self] in
            defer { inFlight.signal() }
            do throws(SystemError) {
                if try !put(crew, UnsafeRawBufferPointer(start: buffer.baseAddress! + skip, count: count), at: at,
                            from: buffer, skip: skip) {
                    crew.buffers.giveBack(buffer)
                }
            } catch {
                failure = error
                crew.buffers.giveBack(buffer)
            }
        }
    }

    /// Where bytes gathered for `offset` start in a buffer of `bufferSize`: `offset`'s place in its
    /// block, when the buffer is large enough to leave that much unused (two blocks at least).
    static func skip(at offset: Int64, bufferSize: Int) -> Int {
        bufferSize >= 2 * DirectIO.alignment ? Int(offset % Int64(DirectIO.alignment)) : 0
    }

    /// Written at `at` (`InPlaceWrites`, writer queue); then the crew counts them, and may take
    /// `buffer` (true: its hashing gives it back). Refused once the lease may no longer write
    /// (cluster mode), also for bytes gathered before its deadline passed.
    private func put(_ crew: SegmentCrew, _ bytes: UnsafeRawBufferPointer, at: Int64, from buffer: UnsafeMutableRawBufferPointer,
                     skip: Int) throws(SystemError) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return false }
        try crew.checkWrite()
        try writes.write(base, count: bytes.count, at: at)
        return crew.fetchWrote(index, count: Int64(bytes.count), next: at + Int64(bytes.count), from: buffer, skip: skip)
    }
}
