import Basics
import Glibc

/// The partial download on disk: appended bytes are copied into buffers of `bufferSize` bytes, and
/// each full one is SHA-256 hashed and written in file order beside the appending thread
/// (`WritePipeline`: at most `depth` buffers; the appender waits when all are in flight).
///
/// Written around the page cache where the file system allows it (`InPlaceWrites`): each buffer's
/// bytes start at their file offset's place in a memory block, so that the whole blocks of every
/// write go direct and only a head and a tail (under a block each) through the page cache. Why: the
/// kernel's copy of written bytes into page-cache folios was most of the CPU a fast fetch spent on
/// this project's virtual machines (`DirectIO`); readers of the file in flight read the blocks
/// back from the device, once for all of them (the pages they bring stay cached).
///
/// Used from one thread at a time (the transfer's, or the engine's work queue); only `written` may
/// be read from any thread.
final class PartialFile {
    let path: String
    private var fd: Int32
    /// How the bytes reach `fd`'s file (a direct descriptor beside it); nil once closed.
    private var file: InPlaceWrites?
    private let writeCall: WriteCall?
    /// Bytes appended: in the file, or in buffers on their way there (hashed before the hash is read).
    private(set) var length: Int64
    /// Bytes known to be on stable storage (after `sync()`).
    private(set) var durableLength: Int64
    private let pipeline: WritePipeline
    private let datasync: SyncCall
    /// The buffer being filled (taken from the pipeline), where its bytes start (the place of their
    /// file offset in a block), and how many it holds.
    private var current: UnsafeMutableRawBufferPointer?
    private var start = 0
    private var filled = 0
    /// Bytes of `current` already handed to the pipeline (`handOver`), at most `filled`.
    private var handedOver = 0
    static let bufferSize = 1 << 20
    /// Buffers per file: one filled while the others are hashed and written.
    static let depth = 4
    /// pwrite(2) (buffered or direct), or a stand-in from tests (e.g. one that fails with ENOSPC).
    typealias WriteCall = InPlaceWrites.PositionedWrite
    /// Stands in for fdatasync(2) (tests: an I/O error).
    typealias SyncCall = @Sendable (Int32) -> Int32

    /// Opens (creating) `path`, keeps at most `keep` bytes (dropping any tail), and hashes the
    /// kept bytes with a bounded buffer. `hash`, when given, saves the re-read (an in-process
    /// resume) if it covers exactly the kept bytes and the file is as it was when it was closed.
    /// `keepTail`: bytes after `keep` stay in the file (a segmented download's segments); the
    /// appends still start at `keep`.
    init(path: String, keep: Int64, keepTail: Bool = false, hash: KeptHash? = nil,
         write writeCall: WriteCall? = nil, sync syncCall: SyncCall? = nil) throws(SystemError) {
        self.path = path
        let datasync = syncCall ?? { fdatasync($0) }
        self.datasync = datasync
        let fd = try syscall("open") { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        let kept: Int64
        let hasherInUse: SHA256Hasher
        do throws(SystemError) {
            var st = stat()
            try syscall("fstat") { fstat(fd, &st) }
            kept = max(0, min(keep, Int64(st.st_size)))
            let unchanged = hash.map { $0.length == kept && $0.stamp == FileStamp(st) } ?? false
            if Int64(st.st_size) != kept && !(keepTail && Int64(st.st_size) > kept) {
                try syscall("ftruncate") { ftruncate(fd, off_t(kept)) }
            }
            if let hash, unchanged {
                hasherInUse = hash.hasher
            } else {
                hasherInUse = SHA256Hasher()
                // Whole blocks direct: the bytes were written so (`HashReadBack`).
                try HashReadBack.hash(fd: fd, count: kept, into: hasherInUse)
            }
            // The kept bytes count as durable from here (what a resume journals): made so first,
            // as the attempt that wrote them may have ended before its sync (a full disk).
            if kept > 0 { try syscall("fdatasync") { datasync(fd) } }
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        self.writeCall = writeCall
        file = InPlaceWrites(sharing: fd, call: writeCall)
        // A block more than `bufferSize`: room for the bytes of a whole buffer wherever they start.
        pipeline = WritePipeline(hasher: hasherInUse, written: kept, bufferSize: Self.bufferSize + DirectIO.alignment,
                                 depth: Self.depth)
        length = kept
        durableLength = kept
    }

    deinit {
        dropCurrent()
        // Never waits here (this may run on a lane, e.g. releasing a `whenWritten` closure).
        if fd >= 0 { pipeline.close(whenIdle: fd) }
    }

    /// Bytes written to the file so far (from its start), at most `length`. `written` may be handed
    /// to, and read from, any thread (e.g. a reader of the file in flight).
    var writtenLength: Int64 { written.value }
    var written: WrittenLength { pipeline.written }

    /// Appends `bytes`: copied into a buffer and counted in `length`; hashed and written later, in
    /// order. An append of at most `bufferSize` bytes is taken whole or not at all. A failed write
    /// (e.g. ENOSPC) is thrown by a later append (at the latest by one that finds every buffer
    /// taken) or by `flush`/`sync`, which first write the bytes it left; the bytes of the append
    /// that throws are not counted. So after a failure `length`, the hash and the file (plus the
    /// unwritten bytes) still agree.
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        if pipeline.hasFailed { try flush() }
        var done = 0
        while done < bytes.count {  // One piece unless `bytes` is larger than a buffer.
            let piece = min(bytes.count - done, Self.bufferSize)
            if current != nil && start + filled + piece > pipeline.bufferSize { seal() }  // Pieces are not split.
            let buffer: UnsafeMutableRawBufferPointer
            if let current {
                buffer = current
            } else {
                buffer = try pipeline.takeBuffer()
                current = buffer
                start = Int(length % Int64(DirectIO.alignment))
            }
            (buffer.baseAddress! + start + filled).copyMemory(from: base + done, byteCount: piece)
            filled += piece
            length += Int64(piece)
            done += piece
            if start + filled == pipeline.bufferSize { seal() }
        }
    }

    /// Bytes appended and not yet handed to the pipeline (they wait in the buffer being filled).
    var heldBack: Int { current == nil ? 0 : filled - handedOver }

    /// Without waiting: the bytes appended so far go to the pipeline now, not once their buffer is
    /// full (the buffer goes on being filled). For a file that others read while it is written:
    /// each append reaches the file soon, in smaller writes.
    func handOver() {
        guard let buffer = current, let file, filled > handedOver else { return }
        pipeline.submit(buffer, offset: start + handedOver, count: filled - handedOver, end: length, file: file,
                        releasesBuffer: false)
        handedOver = filled
    }

    /// Hands the buffer being filled to the pipeline (its bytes not yet handed over, and the buffer
    /// itself once every slice of it is done).
    private func seal() {
        guard let buffer = current else { return }
        current = nil
        if filled > 0, let file {
            pipeline.submit(buffer, offset: start + handedOver, count: filled - handedOver, end: length, file: file)
        } else {
            pipeline.giveBack(buffer)
        }
        filled = 0
        handedOver = 0
    }

    /// Forgets the bytes of the buffer being filled (the caller resets `length`). Slices of it may
    /// still be in flight: the caller discards the pipeline (which waits for them) before the
    /// buffer can be taken again.
    private func dropCurrent() {
        if let current { pipeline.giveBack(current) }
        current = nil
        filled = 0
        handedOver = 0
    }

    /// Writes every appended byte to the file: waits for the ones in flight, writes the ones a
    /// failed write left; throws when a write fails.
    func flush() throws(SystemError) {
        seal()
        try pipeline.drain()
    }

    /// Without waiting: every byte appended so far goes to the file, then `then` gets a second
    /// descriptor of the file (the receiver closes it) and the length they make, for a sync elsewhere. It
    /// runs on the pipeline's write lane, or at once when nothing is in flight; it gets nil when a
    /// write failed (which a later append or flush throws).
    func whenWritten(_ then: @escaping WritePipeline.Written) {
        seal()
        pipeline.whenWritten(length: length, fd: fd, then)
    }

    /// `then` is told, on the write lane (or the thread that writes what a failed write left), each
    /// new length of the file once its bytes are in it: what a reader of the file may read.
    func whenAdvanced(_ then: WritePipeline.Advanced?) {
        pipeline.whenAdvanced(then)
    }

    /// The hashing of appended bytes, and the waits for a free buffer, are timed by `meter` (`CPUWaitMeter`).
    func measureWaits(_ meter: CPUWaitMeter?) {
        pipeline.measureWaits(meter)
    }

    /// Segmented fetch: bytes `[length, end)` were written in place by other connections. Writes
    /// what is buffered, then reads them back once (1 MiB at a time) into the hash and counts them,
    /// so that the partial ends at `end` as if they had been appended.
    func absorb(upTo end: Int64) throws(SystemError) {
        try flush()
        guard end > length else { return }
        pipeline.waitIdle()
        var reached = length
        do {
            try HashReadBack.hash(fd: fd, from: length, count: end - length, into: pipeline.hasher, hashed: { reached = $0 })
        } catch {
            // Counted as far as it was hashed: a later absorb goes on from there, and no byte is
            // hashed twice (the digest would be another file's).
            counted(upTo: reached)
            throw error
        }
        counted(upTo: end)
    }

    /// The file ends at `end`, hashed up to there: appends go on from it.
    private func counted(upTo end: Int64) {
        pipeline.written.set(end)
        length = end
    }

    /// Segmented fetch: the next `bytes.count` bytes after `length` were written in place by another
    /// connection from `bytes`: hashed from them (no read-back) and counted, as `absorb(upTo:)` does.
    func absorb(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try flush()
        guard bytes.count > 0 else { return }
        pipeline.waitIdle()
        pipeline.hasher.update(bytes)
        counted(upTo: length + Int64(bytes.count))
    }

    /// Drops every byte (the next append starts a new version of the file at 0) without waiting for
    /// the file system to free the old bytes: the old file is renamed to `aside` (for the caller to
    /// delete later; descriptors open on it keep reading the old version) and a new empty one takes
    /// its place.
    func replaceWithEmpty(settingAsideAt aside: String) throws(SystemError) {
        try syscall("rename") { rename(path, aside) }
        let fresh: Int32
        do throws(SystemError) {
            fresh = try syscall("open") { open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        } catch {
            _ = rename(aside, path)  // The file stays what it was (the attempt ends; nothing is lost or left aside).
            throw error
        }
        dropCurrent()
        pipeline.discard()  // Bytes in flight land in the old file before its descriptor closes.
        Glibc.close(fd)
        fd = fresh
        file = InPlaceWrites(sharing: fresh, call: writeCall)
        pipeline.hasher.reset()
        pipeline.written.set(0)
        length = 0
        durableLength = 0
    }

    /// Flush + fdatasync: everything appended so far survives a crash.
    func sync() throws(SystemError) {
        try flush()
        try syscall("fdatasync") { datasync(fd) }
        durableLength = length
    }

    /// Flush + full fsync before the file is published (`call` stands in for fsync(2) in tests).
    func fullSync(_ call: SyncCall? = nil) throws(SystemError) {
        try flush()
        try syscall("fsync") { (call ?? { fsync($0) })(fd) }
        durableLength = length
    }

    /// The SHA-256 of every appended byte (hands the buffered ones over and waits for the lanes).
    var sha256Hex: String {
        seal()
        pipeline.waitIdle()
        return pipeline.hasher.hexDigest()
    }

    /// The open file's device and inode.
    func identity() throws(SystemError) -> FileIdentity {
        var st = stat()
        try syscall("fstat") { fstat(fd, &st) }
        return FileIdentity(st)
    }

    /// Flushes and closes the descriptor. Returns the bytes in the file and, when they are exactly
    /// what was hashed, the hash for a later in-process resume (with the file's stamp as closed).
    func close() -> (kept: KeptHash?, length: Int64) {
        var intact = true
        var stamp: FileStamp?
        if fd >= 0 {
            do { try flush() } catch { intact = false }
            pipeline.discard()  // Waits for the lanes: the hasher is whole.
            stamp = FileStamp.settled(fd)
            Glibc.close(fd)
            fd = -1
            file = nil
        }
        pipeline.releaseSpareBuffers()
        guard intact else { return (nil, writtenLength) }
        return (stamp.map { KeptHash(hasher: pipeline.hasher, length: length, stamp: $0) }, length)
    }
}
