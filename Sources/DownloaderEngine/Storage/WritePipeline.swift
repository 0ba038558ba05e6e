import Basics
import Foundation
import Glibc
import Synchronization

/// The partial file's hashing and writing, beside the thread that appends. The owner fills one of
/// at most `depth` buffers and submits it; each submitted chunk is hashed (SHA-256) on one lane
/// and written on another (`InPlaceWrites`: whole blocks direct, the rest through the page cache),
/// both in file order, while the owner fills the next buffer. A buffer comes back once hashed and
/// written; when all are out the owner waits (back-pressure), so memory stays bounded by
/// `depth * bufferSize` and nothing queues without bound.
/// A buffer may also go over in slices (`WriteChunk`) while the owner goes on filling it, so that
/// bytes reach the file soon without waiting for a full buffer; it comes back after its last slice.
/// `whenAdvanced` tells each new length of the file (e.g. to readers of the file in flight).
///
/// Why two lanes: measured on a loopback fetch to tmpfs, the kernel's copy into the page cache and
/// the hash each cost about as much as everything else together (socket read, copy, libcurl);
/// on separate lanes the three halves of the work spread over two cores. (Where the file system
/// takes direct writes the copy is gone, and the write lane mostly waits for the device.)
///
/// A failed write (e.g. ENOSPC) stops the write lane at the failed chunk: it and the chunks after
/// it stay, hashed but (partly) unwritten, and `hasFailed` turns true. The owner writes them
/// itself, in order, in `drain` (or in `takeBuffer`, when no buffer comes back otherwise), and gets
/// the error if that fails again. Always: submitted bytes = bytes in the file + unwritten bytes.
///
/// Threads: one owner at a time calls the methods; the lanes run on serial queues of their own;
/// `written` and `hasFailed` may be read from any thread. The hasher belongs to the hash lane while
/// chunks are in flight, to the owner once `waitIdle` returned.
final class WritePipeline: @unchecked Sendable {
    /// Told once a chunk is written: a second descriptor of its file (`FileStore.descriptorForSync`;
    /// the receiver closes it) and the file length at the end of that chunk; nil when the write
    /// failed or no descriptor was left.
    typealias Written = @Sendable (_ descriptor: Int32?, _ length: Int64) -> Void

    /// Told, on the write lane (or the owner's thread), each time bytes reach the file: the file's
    /// length from its start. Never under the pipeline's lock; do little (e.g. record it and wake readers).
    typealias Advanced = @Sendable (_ length: Int64) -> Void

    let hasher: SHA256Hasher
    let bufferSize: Int
    let depth: Int
    /// Bytes in the file, from its start.
    let written: WrittenLength
    private let hashQueue = DispatchQueue(label: "partial-file.hash")
    private let writeQueue = DispatchQueue(label: "partial-file.write")
    private let failed = Atomic<Bool>(false)

    // Guarded by `condition`.
    private let condition = NSCondition()
    /// In flight, in file order: `chunks[..<hashedCount]` are hashed, `chunks[..<writtenCount]` written.
    private var chunks: [WriteChunk] = []
    private var hashedCount = 0
    private var writtenCount = 0
    private var spare: [UnsafeMutableRawBufferPointer] = []
    /// Buffers in existence (spare, in flight, or being filled by the owner); at most `depth`.
    private var allocated = 0
    private var hashing = false
    private var writing = false
    private var failure: SystemError?
    /// A descriptor to close once both lanes are idle (the owner went away meanwhile).
    private var closeWhenIdle: Int32?
    private var advanced: Advanced?
    /// Times the hash lane's work (whether it waits for a CPU) and the owner's waits for a buffer,
    /// when set.
    private var meter: CPUWaitMeter?

    /// `written`: the bytes already in the file (the kept ones).
    init(hasher: SHA256Hasher, written: Int64, bufferSize: Int, depth: Int) {
        self.hasher = hasher
        self.written = WrittenLength(written)
        self.bufferSize = bufferSize
        self.depth = max(2, depth)
    }

    deinit {
        // Lanes hold the pipeline while they run: none runs now. A buffer whose last slice is not
        // here was given back by the owner (in `spare`).
        for chunk in chunks where chunk.releasesBuffer { chunk.buffer.deallocate() }
        for buffer in spare { buffer.deallocate() }
    }

    /// A write failed and its bytes are not all in the file yet.
    var hasFailed: Bool { failed.load(ordering: .acquiring) }

    /// A buffer of `bufferSize` bytes for the owner to fill: a spare one, a new one while fewer than
    /// `depth` exist, else the next one both lanes are done with. When the write lane stopped on a
    /// failure, the unwritten chunks are written first; that failing again is thrown.
    func takeBuffer() throws(SystemError) -> UnsafeMutableRawBufferPointer {
        condition.lock()
        // The meter and when the wait for a buffer began, if it had to wait; told after the lock.
        var waited: (meter: CPUWaitMeter, since: UInt64)?
        defer { if let waited { waited.meter.heldBack(since: waited.since) } }
        while true {
            if let buffer = spare.popLast() {
                condition.unlock()
                return buffer
            }
            if allocated < depth {
                allocated += 1
                condition.unlock()
                return UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 4096)
            }
            if failure != nil && !writing && !hashing {
                condition.unlock()
                try writeUnwritten()
                condition.lock()
                continue
            }
            if waited == nil, let meter { waited = (meter, meter.monotonic()) }
            condition.wait()
        }
    }

    /// Gives back a buffer taken and not submitted.
    func giveBack(_ buffer: UnsafeMutableRawBufferPointer) {
        condition.withLock { spare.append(buffer) }
    }

    /// Hands `count` bytes of `buffer` from `offset` to both lanes, to be written through `file`; `end` is
    /// the file offset after them. `releasesBuffer`: the last slice of `buffer` (given back once
    /// done; until then the owner may go on filling the buffer beyond the slice). Never waits. While
    /// a failure stands, the chunk only joins the unwritten ones.
    func submit(_ buffer: UnsafeMutableRawBufferPointer, offset: Int = 0, count: Int, end: Int64, file: InPlaceWrites,
                releasesBuffer: Bool = true) {
        condition.lock()
        chunks.append(WriteChunk(buffer: buffer, offset: offset, count: count, end: end, file: file,
                                 releasesBuffer: releasesBuffer))
        let startHashing = !hashing
        let startWriting = !writing && failure == nil
        hashing = true
        if startWriting { writing = true }
        condition.unlock()
        if startHashing { hashQueue.async { self.runHashLane() } }
        if startWriting { writeQueue.async { self.runWriteLane() } }
    }

    /// Calls `then` once every chunk submitted so far is written: on the write lane after the last
    /// one, or at once (on the caller's thread) when none is in flight, with a second descriptor of
    /// `fd`'s file and `length`; with nil at once when a failure stands.
    func whenWritten(length: Int64, fd: Int32, _ then: @escaping Written) {
        condition.lock()
        if failure != nil {
            condition.unlock()
            then(nil, length)
        } else if writtenCount < chunks.count, let last = chunks.last {
            last.then.append(then)
            condition.unlock()
        } else {
            condition.unlock()
            then(FileStore.descriptorForSync(fd), length)
        }
    }

    /// Returns once both lanes are idle: every chunk is hashed, and written unless a write failed.
    func waitIdle() {
        condition.lock()
        while hashing || writing { condition.wait() }
        condition.unlock()
    }

    /// Waits for the lanes, then writes what a failed write left; throws when that fails again.
    func drain() throws(SystemError) {
        waitIdle()
        if hasFailed { try writeUnwritten() }
    }

    /// Waits for the lanes, then forgets every chunk, written or not, and any failure: the file is
    /// about to be cut, replaced or closed. The written length is the owner's to set afterwards.
    func discard() {
        waitIdle()
        condition.withLock {
            for chunk in chunks where chunk.releasesBuffer { spare.append(chunk.buffer) }
            chunks.removeAll()
            hashedCount = 0
            writtenCount = 0
            failure = nil
        }
        failed.store(false, ordering: .releasing)
    }

    /// Frees the spare buffers (the file is closed; discarded first).
    func releaseSpareBuffers() {
        condition.withLock {
            for buffer in spare { buffer.deallocate() }
            allocated -= spare.count
            spare.removeAll()
        }
    }

    /// The owner is going away without waiting: `fd` is closed now, or by the last lane to finish.
    func close(whenIdle fd: Int32) {
        let now = condition.withLock {
            guard hashing || writing else { return true }
            closeWhenIdle = fd
            return false
        }
        if now { Glibc.close(fd) }
    }

    /// `then` is told each new length of the file from now on (nil: no longer).
    func whenAdvanced(_ then: Advanced?) {
        condition.withLock { advanced = then }
    }

    /// The hash lane's chunks and the owner's waits for a buffer are timed by `meter` (nil: not timed).
    func measureWaits(_ meter: CPUWaitMeter?) {
        condition.withLock { self.meter = meter }
    }

    // MARK: Lanes

    private func runHashLane() {
        condition.lock()
        while hashedCount < chunks.count {
            let chunk = chunks[hashedCount]
            let meter = self.meter
            condition.unlock()
            if let meter {
                meter.timed { hasher.update(chunk.bytes) }
            } else {
                hasher.update(chunk.bytes)
            }
            condition.lock()
            hashedCount += 1
            retireDone()
        }
        hashing = false
        laneStopped()
    }

    private func runWriteLane() {
        condition.lock()
        while failure == nil && writtenCount < chunks.count {
            let chunk = chunks[writtenCount]
            condition.unlock()
            let error = write(chunk)
            condition.lock()
            var told: [Written] = []
            var advance: Advanced?
            if let error {
                failure = error
                failed.store(true, ordering: .releasing)
                for waiting in chunks[writtenCount...] {
                    told += waiting.then
                    waiting.then = []
                }
            } else {
                writtenCount += 1
                told = chunk.then
                chunk.then = []
                if chunk.count > 0 { advance = advanced }
                retireDone()
            }
            if !told.isEmpty || advance != nil {
                condition.unlock()
                advance?(chunk.end)
                for then in told { then(error == nil ? FileStore.descriptorForSync(chunk.file.descriptor) : nil, chunk.end) }
                condition.lock()
            }
        }
        writing = false
        laneStopped()
    }

    /// Under `condition`, which it releases: a lane is done for now.
    private func laneStopped() {
        var orphan: Int32?
        if !hashing && !writing, let fd = closeWhenIdle {
            orphan = fd
            closeWhenIdle = nil
        }
        condition.broadcast()
        condition.unlock()
        if let orphan { Glibc.close(orphan) }
    }

    /// Under `condition`: chunks both hashed and written give their buffers back (the last slice of each).
    private func retireDone() {
        let retired = min(hashedCount, writtenCount)
        guard retired > 0 else { return }
        for chunk in chunks[..<retired] where chunk.releasesBuffer { spare.append(chunk.buffer) }
        chunks.removeFirst(retired)
        hashedCount -= retired
        writtenCount -= retired
        condition.broadcast()
    }

    /// The owner, both lanes idle: writes, in order, the chunks a failure left; clears the failure.
    private func writeUnwritten() throws(SystemError) {
        waitIdle()
        let pending: [WriteChunk] = condition.withLock { Array(chunks[writtenCount...]) }
        for chunk in pending {
            if let error = write(chunk) {
                condition.withLock { failure = error }
                throw error
            }
            let advance = condition.withLock {
                writtenCount += 1
                retireDone()
                return chunk.count > 0 ? advanced : nil
            }
            advance?(chunk.end)
        }
        condition.withLock { failure = nil }
        failed.store(false, ordering: .releasing)
    }

    /// Positioned writes until the chunk is in the file, counting each byte that lands; the error
    /// that stops it.
    private func write(_ chunk: WriteChunk) -> SystemError? {
        do throws(SystemError) {
            while let (base, count, offset) = chunk.unwritten {
                let n = try chunk.file.writeSome(base, count: count, at: offset)
                chunk.written += n
                written.add(Int64(n))
            }
            return nil
        } catch {
            return error
        }
    }

}
