import Basics
import CLinux
import Glibc

/// Reads and writes of file bytes around the page cache (`O_DIRECT`), where the bytes need not stay
/// in memory: a download's bytes written (`InPlaceWrites`: the single connection's buffers and a
/// segment's gathered bytes), and kept bytes or pieces read back once to be hashed (`HashReadBack`).
///
/// Why: every buffered write copies its bytes into page-cache folios the kernel must first find.
/// On this project's virtual machines that copy was the largest cost of a capped segmented fetch,
/// and the same for every program writing a fresh GiB (aria2c spent 2.3-4.3 CPU-s per GiB on it in
/// the benchmark's section 11, where tmpfs origin files hold most of the memory); written direct,
/// the device takes the bytes from the process's own buffer, and the hash's read-back comes the
/// same way. Measured with dd, 1 GiB of 1 MiB writes: 0.66 CPU-s buffered, 0.13 direct (a read
/// back direct: 0.07).
///
/// Only whole aligned blocks go direct: `alignment` (4096) in the file and in memory, so that a
/// page is never written both ways at once (the rest of a write goes through the page cache, as
/// before). A file system that refuses direct I/O (at open or at the first call: `EINVAL`) is
/// written and read through the page cache instead; tmpfs accepts the flag and caches anyway.
enum DirectIO {
    /// File offsets, lengths and memory addresses of direct calls are multiples of this. A page:
    /// larger than any device's logical block here (ext4 on virtio asks 512 bytes; `statx`'s
    /// `STATX_DIOALIGN`), and whole pages never shared with a buffered write.
    static let alignment = 4096

    /// How `count` bytes at file offset `offset` are cut: `head` bytes through the page cache up to
    /// the first aligned offset, then `middle` bytes (whole blocks) direct, then the rest (`count -
    /// head - middle`) through the page cache again. All of it buffered (`middle` 0) when shorter
    /// than a block after the head.
    static func split(offset: Int64, count: Int, alignment: Int = alignment) -> (head: Int, middle: Int) {
        guard count > 0, alignment > 0 else { return (max(0, count), 0) }
        let misalignment = Int(offset % Int64(alignment))
        let head = min(count, misalignment == 0 ? 0 : alignment - misalignment)
        let middle = (count - head) / alignment * alignment
        return (head, middle)
    }

    /// A second descriptor on the same open file as `fd` (whatever its path became since), with
    /// `flags | O_DIRECT`; nil when that cannot be had (no /proc, a file system without direct I/O).
    static func reopen(_ fd: Int32, flags: Int32) -> Int32? {
        let direct = open("/proc/self/fd/\(fd)", flags | clinux_o_direct() | O_CLOEXEC)
        return direct >= 0 ? direct : nil
    }

    /// Whether `base` may be handed to a direct call.
    static func aligned(_ base: UnsafeRawPointer) -> Bool {
        UInt(bitPattern: base) % UInt(alignment) == 0
    }
}
