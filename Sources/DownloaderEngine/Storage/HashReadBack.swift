import Basics
import Glibc

/// Bytes of a file read back once to be hashed (a partial's kept bytes at a resume, a segmented
/// attempt's pieces written in place): whole aligned blocks direct (`DirectIO`), so that bytes
/// written around the page cache are not brought into it just to be hashed and dropped; the rest,
/// or all of it where the file system refuses direct reads, through the page cache. Direct reads
/// see every byte a buffered write left in the page cache (the kernel writes such pages back
/// first). A bounded buffer, reused for the whole range.
enum HashReadBack {
    /// Bytes read at once at most.
    static let chunk = 1 << 20

    typealias PositionedRead = (Int32, UnsafeMutableRawPointer, Int, off_t) -> Int

    /// Reads `[start, start + count)` of `fd` into `hasher`; `hashed` hears how far it got after
    /// each read. A file shorter than that is `EIO`. `direct: false` reads it all through the
    /// page cache.
    static func hash(fd: Int32, from start: Int64 = 0, count: Int64, into hasher: SHA256Hasher, direct: Bool = true,
                     read: PositionedRead = { Glibc.pread($0, $1, $2, $3) },
                     hashed: (Int64) -> Void = { _ in }) throws(SystemError) {
        guard count > 0 else { return }
        var directFD = direct && count >= Int64(DirectIO.alignment) ? DirectIO.reopen(fd, flags: O_RDONLY) : nil
        defer { if let directFD { Glibc.close(directFD) } }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: DirectIO.alignment)
        defer { buffer.deallocate() }
        var offset = start
        let end = start + count
        while offset < end {
            let left = Int(min(Int64(chunk), end - offset))
            let (head, middle) = DirectIO.split(offset: offset, count: left)
            var n: Int
            if head == 0, middle > 0, let direct = directFD {
                do throws(SystemError) {
                    n = try syscall("pread") { read(direct, buffer.baseAddress!, middle, off_t(offset)) }
                } catch where error.errno == EINVAL {
                    Glibc.close(direct)  // Refused by the file system: through the page cache from now on.
                    directFD = nil
                    continue
                }
            } else {
                // Up to the first aligned offset when blocks after it may go direct; else all of it.
                let want = directFD != nil && head > 0 && middle > 0 ? head : left
                n = try syscall("pread") { read(fd, buffer.baseAddress!, want, off_t(offset)) }
            }
            if n == 0 { throw SystemError(errno: EIO, function: "pread (file shrank)") }
            hasher.update(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n))
            offset += Int64(n)
            hashed(offset)
        }
    }
}
