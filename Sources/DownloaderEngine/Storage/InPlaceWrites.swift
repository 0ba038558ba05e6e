import Basics
import Glibc
import Synchronization

/// The descriptors a file's bytes are written through, in place: whole aligned blocks direct
/// (`DirectIO`), the rest of each write through the page cache (`PageCacheWrites`). A segmented
/// attempt's fetches write their pieces so, and the single connection's write lane its buffers
/// (`WritePipeline`). Direct writes stop for good at the first `EINVAL` (a file system that took
/// the flag at open but refuses the calls); the bytes are then written buffered. Closes the
/// descriptors it opened when it goes. Thread-safe (`write` from one writer at a time, `descriptor` from any).
final class InPlaceWrites: Sendable {
    /// The buffered descriptor (also the one synced at checkpoints).
    let descriptor: Int32
    private let ownsDescriptor: Bool
    private let direct: Int32?
    private let directUsable = Atomic<Bool>(true)
    private let call: PositionedWrite

    typealias PositionedWrite = @Sendable (Int32, UnsafeRawPointer, Int, off_t) -> Int

    /// Opens `path` for writing, and a direct descriptor beside it when `direct` (and the file
    /// system allows it). `call` stands in for pwrite(2) (tests).
    convenience init(path: String, direct: Bool = true, call: PositionedWrite? = nil) throws(SystemError) {
        let fd = try syscall("open") { open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) }
        self.init(descriptor: fd, owned: true, direct: direct, call: call)
    }

    /// Writes through `descriptor`, which stays the caller's to close (after the last write), and
    /// a direct descriptor of its own beside it when `direct`.
    convenience init(sharing descriptor: Int32, direct: Bool = true, call: PositionedWrite? = nil) {
        self.init(descriptor: descriptor, owned: false, direct: direct, call: call)
    }

    private init(descriptor: Int32, owned: Bool, direct: Bool, call: PositionedWrite?) {
        self.descriptor = descriptor
        ownsDescriptor = owned
        self.direct = direct ? DirectIO.reopen(descriptor, flags: O_WRONLY) : nil
        self.call = call ?? { Glibc.pwrite($0, $1, $2, $3) }
    }

    deinit {
        if ownsDescriptor { Glibc.close(descriptor) }
        if let direct { Glibc.close(direct) }
    }

    /// Whether whole blocks still go direct.
    var writesDirect: Bool { direct != nil && directUsable.load(ordering: .relaxed) }

    /// Writes `count` bytes from `base` at `offset`. `base` is at the same place in its block as
    /// `offset` (`DirectIO.alignment`) for the middle to go direct; otherwise all is buffered.
    /// `call`, when given, stands in for pwrite(2) in this write alone (tests).
    func write(_ base: UnsafeRawPointer, count: Int, at offset: Int64,
               call: PageCacheWrites.PositionedWrite? = nil) throws(SystemError) {
        var done = 0
        while done < count {
            done += try writeSome(base + done, count: count - done, at: offset + Int64(done), call: call)
        }
    }

    /// One system call's worth of `write`: the head up to the first block boundary (buffered),
    /// else the whole blocks after it (direct, in one call), else up to `PageCacheWrites.maxBytes`
    /// buffered (the tail, or everything when nothing goes direct). Returns the bytes written, more
    /// than 0 (a call that writes nothing is `EIO`); the caller goes on from there. A direct call
    /// stopped inside a block (a full disk) leaves a head for the next one.
    func writeSome(_ base: UnsafeRawPointer, count: Int, at offset: Int64,
                   call: PageCacheWrites.PositionedWrite? = nil) throws(SystemError) -> Int {
        let call = call ?? self.call
        let (head, middle) = DirectIO.split(offset: offset, count: count)
        let blocksDirect = middle > 0 && writesDirect && DirectIO.aligned(base + head)
        if blocksDirect && head == 0, let direct {
            do throws(SystemError) {
                return try PageCacheWrites.once(direct, base, count: middle, at: offset, call: call)
            } catch where error.errno == EINVAL {
                // Refused by the file system (or an alignment it asks beyond ours): buffered from now on.
                directUsable.store(false, ordering: .relaxed)
            }
        }
        let buffered = blocksDirect && head > 0 ? head : min(count, PageCacheWrites.maxBytes)
        return try PageCacheWrites.once(descriptor, base, count: buffered, at: offset, call: call)
    }
}
