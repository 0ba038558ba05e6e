import Basics
import Glibc
import Synchronization

/// The descriptors a segmented attempt's fetches write their pieces through, in place: whole
/// aligned blocks direct (`DirectIO`), the rest of each write through the page cache
/// (`PageCacheWrites`). Direct writes stop for good at the first `EINVAL` (a file system that took
/// the flag at open but refuses the calls); the bytes are then written buffered. Closes both
/// descriptors when it goes. Thread-safe (`write` from a crew's writer queue, `descriptor` from any).
final class InPlaceWrites: Sendable {
    /// The buffered descriptor (also the one synced at checkpoints).
    let descriptor: Int32
    private let direct: Int32?
    private let directUsable = Atomic<Bool>(true)
    private let call: PositionedWrite

    typealias PositionedWrite = @Sendable (Int32, UnsafeRawPointer, Int, off_t) -> Int

    /// Opens `path` for writing, and a direct descriptor beside it when `direct` (and the file
    /// system allows it). `call` stands in for pwrite(2) (tests).
    init(path: String, direct: Bool = true, call: PositionedWrite? = nil) throws(SystemError) {
        descriptor = try syscall("open") { open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) }
        self.direct = direct ? DirectIO.reopen(descriptor, flags: O_WRONLY) : nil
        self.call = call ?? { Glibc.pwrite($0, $1, $2, $3) }
    }

    deinit {
        Glibc.close(descriptor)
        if let direct { Glibc.close(direct) }
    }

    /// Whether whole blocks still go direct.
    var writesDirect: Bool { direct != nil && directUsable.load(ordering: .relaxed) }

    /// Writes `count` bytes from `base` at `offset`. `base` is at the same place in its block as
    /// `offset` (`DirectIO.alignment`) for the middle to go direct; otherwise all is buffered.
    /// `call`, when given, stands in for pwrite(2) in this write alone (tests).
    func write(_ base: UnsafeRawPointer, count: Int, at offset: Int64,
               call: PageCacheWrites.PositionedWrite? = nil) throws(SystemError) {
        let call = call ?? self.call
        let (head, middle) = DirectIO.split(offset: offset, count: count)
        guard middle > 0, let direct, writesDirect, DirectIO.aligned(base + head) else {
            try PageCacheWrites.write(descriptor, base, count: count, at: offset, call: call)
            return
        }
        try PageCacheWrites.write(descriptor, base, count: head, at: offset, call: call)
        do throws(SystemError) {
            try Self.writeDirect(direct, base + head, count: middle, at: offset + Int64(head), call: call)
        } catch where error.errno == EINVAL {
            // Refused by the file system (or an alignment it asks beyond ours): buffered from now on.
            directUsable.store(false, ordering: .relaxed)
            try PageCacheWrites.write(descriptor, base + head, count: middle, at: offset + Int64(head), call: call)
        }
        let tail = count - head - middle
        try PageCacheWrites.write(descriptor, base + head + middle, count: tail, at: offset + Int64(head + middle), call: call)
    }

    /// Direct calls go whole (no slicing: nothing enters the page cache). A short one (a full disk
    /// mid-call) goes on from where it stopped; stopped inside a block, the next call is refused
    /// (`EINVAL`) and `write` writes the middle again through the page cache.
    private static func writeDirect(_ fd: Int32, _ base: UnsafeRawPointer, count: Int, at offset: Int64,
                                    call: PageCacheWrites.PositionedWrite) throws(SystemError) {
        var done = 0
        while done < count {
            let n = try syscall("pwrite") { call(fd, base + done, count - done, off_t(offset + Int64(done))) }
            guard n > 0 else { throw SystemError(errno: EIO, function: "pwrite (wrote nothing)") }
            done += n
        }
    }
}
