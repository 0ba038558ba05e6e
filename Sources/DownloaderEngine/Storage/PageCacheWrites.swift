import Basics
import Glibc

/// How much one write(2) or pwrite(2) of file bytes hands the page cache at most.
///
/// The kernel sizes the page-cache folios of a buffered write after the write: on ext4 (Linux 6.x,
/// large folios) one 1 MiB write at a 1 MiB boundary takes order-8 folios, which come from free
/// blocks of that size. On a virtual machine whose free memory goes back to the host (virtio-balloon
/// free page reporting, as on this project's Firecracker VMs, reported in 2 MiB blocks), such
/// blocks are most likely the ones the host took back, each first touch a fault in the host (the
/// cause is inferred, the cost measured). A pwrite(2) loop of 1 GiB at 200 MB/s after the previous
/// GiB was freed: 1 MiB writes cost 1.9-2.3 CPU-s in the kernel, 128 KiB writes 0.31, 64 KiB 0.35
/// (16 KiB: 0.67); a segmented fetch on a capped origin spent half of its CPU on that copy (3.4
/// CPU-s per GiB, 1.6 with these writes). The bytes are still gathered in larger buffers (fewer
/// wake-ups and locks): only the system calls are cut, eight per MiB.
///
/// For every write of a download's bytes that goes through the page cache (`InPlaceWrites`: the
/// heads and tails around direct blocks, or everything where the file system takes no direct
/// writes) and for a file copied buffer by buffer.
enum PageCacheWrites {
    /// Bytes per call at most.
    static let maxBytes = 128 << 10

    typealias PositionedWrite = (Int32, UnsafeRawPointer, Int, off_t) -> Int

    /// Writes `count` bytes from `base` at `offset` of `fd`: pwrite(2) calls of at most `maxBytes`,
    /// short writes continued; a call that writes nothing is `EIO` (never looped on).
    static func write(_ fd: Int32, _ base: UnsafeRawPointer, count: Int, at offset: Int64,
                      call: PositionedWrite = { Glibc.pwrite($0, $1, $2, $3) }) throws(SystemError) {
        var done = 0
        while done < count {
            done += try once(fd, base + done, count: min(count - done, maxBytes), at: offset + Int64(done), call: call)
        }
    }

    /// One pwrite(2) call of `count` bytes (not sliced: also a direct call, `InPlaceWrites`);
    /// returns the bytes written, more than 0: a call that writes nothing is `EIO`.
    static func once(_ fd: Int32, _ base: UnsafeRawPointer, count: Int, at offset: Int64,
                     call: PositionedWrite) throws(SystemError) -> Int {
        let n = try syscall("pwrite") { call(fd, base, count, off_t(offset)) }
        guard n > 0 else { throw SystemError(errno: EIO, function: "pwrite (wrote nothing)") }
        return n
    }
}
