import Basics
import Foundation
import Glibc

/// One ranged request of a segmented attempt: `Range: bytes=first-last` with `If-Range`, its body
/// written in place (`InPlaceWrites`: whole blocks direct, at the segment's next byte) on the
/// transfer thread, gathered first into a buffer of its own (`WriteBatching`: libcurl's 16 KiB
/// pieces become 1 MiB writes) and counted by the crew once written. Whatever is gathered is written when the transfer ends, however it
/// ends. Its head is judged by `SegmentPlanner.judgeSegment`; what it means for the attempt is the
/// crew's to decide.
final class SegmentFetch: TransferDelegate, BodySink, @unchecked Sendable {
    let index: Int
    let first: Int64
    let last: Int64
    /// Held while the fetch runs, let go once it ended: the crew's descriptor, which the fetch
    /// writes through, stays open until then, whatever else let the attempt go (a download removed
    /// while its first connection was still being started, say). Transfer thread.
    private(set) var crew: SegmentCrew?
    /// The crew's descriptors: held by every fetch, so they stay open until the last one ended.
    private let writes: InPlaceWrites
    private let batching: WriteBatching
    /// Bytes a gathering buffer holds (the crew's `GatherBuffers.capacity`).
    private let bufferSize: Int
    private let monotonic: @Sendable () -> Double
    // Transfer thread.
    /// The next file offset to write.
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

    init(index: Int, first: Int64, last: Int64, crew: SegmentCrew, writes: InPlaceWrites, batching: WriteBatching,
         monotonic: @escaping @Sendable () -> Double) {
        self.index = index
        self.first = first
        self.last = last
        self.crew = crew
        self.writes = writes
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
        let crew = self.crew
        defer { self.crew = nil }
        var result = result
        do throws(SystemError) {
            try flush()
        } catch {
            if case .success = result {
                result = .failure(TransferFailure(.disk, "writing the body failed: \(error)", code: error.errno))
            }
        }
        if let buffer {
            if let crew { crew.buffers.giveBack(buffer) } else { buffer.deallocate() }
        }
        buffer = nil
        crew?.fetchEnded(self, result)
    }

    /// Writes the gathered bytes; when they landed where the file's hashed prefix will go on, the
    /// crew's hashing takes the buffer (hashed from memory, not read back) and the next bytes are
    /// gathered in another.
    private func flush() throws(SystemError) {
        guard let buffer, held > 0 else { return }
        let count = held
        held = 0  // Written or not, they are not gathered any more (a failed write ends the fetch).
        if try put(UnsafeRawBufferPointer(start: buffer.baseAddress! + skip, count: count), from: buffer) {
            self.buffer = nil
        }
    }

    /// Where bytes gathered for `offset` start in a buffer of `bufferSize`: `offset`'s place in its
    /// block, when the buffer is large enough to leave that much unused (two blocks at least).
    static func skip(at offset: Int64, bufferSize: Int) -> Int {
        bufferSize >= 2 * DirectIO.alignment ? Int(offset % Int64(DirectIO.alignment)) : 0
    }

    /// Written at `next` (`InPlaceWrites`); then the crew counts them (and may take `buffer`:
    /// true). Refused once the lease may no longer write (cluster mode), also for bytes gathered
    /// before its deadline passed.
    private func put(_ bytes: UnsafeRawBufferPointer, from buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return false }
        try crew?.checkWrite()
        try writes.write(base, count: bytes.count, at: next)
        next += Int64(bytes.count)
        return crew?.fetchWrote(index, count: Int64(bytes.count), next: next, from: buffer, skip: skip) ?? false
    }
}
