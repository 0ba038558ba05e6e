import Basics
import Glibc

/// The partial download on disk: appends through a 1 MiB buffer with write(2) loops and keeps an
/// incremental SHA-256 of everything appended. Used from one thread at a time (the transfer's, or the engine's work queue).
final class PartialFile {
    let path: String
    private var fd: Int32
    /// Bytes appended and hashed (buffered ones included).
    private(set) var length: Int64
    /// Bytes known to be on stable storage (after `sync()`).
    private(set) var durableLength: Int64
    private let hasher: SHA256Hasher
    /// Appended bytes not yet written to the file (at most `bufferSize`).
    private var buffer: UnsafeMutableRawBufferPointer?
    private var buffered = 0
    static let bufferSize = 1 << 20
    /// write(2), or a stand-in from tests (e.g. one that fails with ENOSPC).
    typealias WriteCall = @Sendable (Int32, UnsafeRawPointer, Int) -> Int
    private let writeCall: WriteCall

    /// Opens (creating) `path`, keeps at most `keep` bytes (dropping any tail), and hashes the
    /// kept bytes with a bounded buffer. `hasher`, when given, already covers exactly `keep`
    /// bytes of this file (an in-process resume) and saves the re-read.
    init(path: String, keep: Int64, hasher: SHA256Hasher? = nil, hashedLength: Int64? = nil,
         write writeCall: WriteCall? = nil) throws(SystemError) {
        self.path = path
        self.writeCall = writeCall ?? { Glibc.write($0, $1, $2) }
        let fd = try syscall("open") { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        let kept: Int64
        let hasherInUse: SHA256Hasher
        do throws(SystemError) {
            var st = stat()
            try syscall("fstat") { fstat(fd, &st) }
            kept = max(0, min(keep, Int64(st.st_size)))
            if Int64(st.st_size) != kept {
                try syscall("ftruncate") { ftruncate(fd, off_t(kept)) }
            }
            if let hasher, hashedLength == kept {
                hasherInUse = hasher
            } else {
                hasherInUse = SHA256Hasher()
                try Self.hash(fd: fd, count: kept, into: hasherInUse)
            }
            try syscall("lseek") { lseek(fd, off_t(kept), SEEK_SET) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        self.hasher = hasherInUse
        length = kept
        durableLength = kept
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
        buffer?.deallocate()
    }

    private static func hash(fd: Int32, count: Int64, into hasher: SHA256Hasher) throws(SystemError) {
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < count {
            let want = Int(min(Int64(chunk), count - offset))
            let n = try syscall("pread") { pread(fd, buffer.baseAddress, want, off_t(offset)) }
            if n == 0 { throw SystemError(errno: EIO, function: "pread (file shrank)") }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += Int64(n)
        }
    }

    /// Appends `bytes` (written through a bounded buffer to save system calls). They are hashed and
    /// counted in `length` only once written or buffered, so after a failed write (e.g. ENOSPC)
    /// `length`, the hash and the file (plus buffer) still agree.
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        if buffered + bytes.count > Self.bufferSize { try flush() }
        if bytes.count >= Self.bufferSize {
            try writeAll(base, bytes.count)
        } else {
            let buffer = writeBuffer()
            (buffer.baseAddress! + buffered).copyMemory(from: base, byteCount: bytes.count)
            buffered += bytes.count
        }
        hasher.update(bytes)
        length += Int64(bytes.count)
    }

    private func writeBuffer() -> UnsafeMutableRawBufferPointer {
        if let buffer { return buffer }
        let fresh = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 64)
        buffer = fresh
        return fresh
    }

    /// write(2) loop over short writes; on failure the unwritten rest stays buffered.
    private func writeAll(_ base: UnsafeRawPointer, _ count: Int) throws(SystemError) {
        var done = 0
        while done < count {
            done += try syscall("write") { writeCall(fd, base + done, count - done) }
        }
    }

    /// Writes the buffered bytes to the file.
    func flush() throws(SystemError) {
        guard buffered > 0, let buffer, let base = buffer.baseAddress else { return }
        var done = 0
        do throws(SystemError) {
            while done < buffered {
                done += try syscall("write") { writeCall(fd, base + done, buffered - done) }
            }
        } catch {
            if done > 0 {
                (base).copyMemory(from: base + done, byteCount: buffered - done)
                buffered -= done
            }
            throw error
        }
        buffered = 0
    }

    /// Drops every byte: the next append starts a new version of the file at 0.
    func truncateToZero() throws(SystemError) {
        buffered = 0
        try syscall("ftruncate") { ftruncate(fd, 0) }
        try syscall("lseek") { lseek(fd, 0, SEEK_SET) }
        hasher.reset()
        length = 0
        durableLength = 0
    }

    /// Like `truncateToZero`, without waiting for the file system to free the old bytes: the old
    /// file is renamed to `aside` (for the caller to delete later) and a new empty one takes its place.
    func replaceWithEmpty(settingAsideAt aside: String) throws(SystemError) {
        try syscall("rename") { rename(path, aside) }
        let fresh = try syscall("open") { open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        Glibc.close(fd)
        fd = fresh
        buffered = 0
        hasher.reset()
        length = 0
        durableLength = 0
    }

    /// Flush + fdatasync: everything appended so far survives a crash.
    func sync() throws(SystemError) {
        try flush()
        try syscall("fdatasync") { fdatasync(fd) }
        durableLength = length
    }

    /// A second descriptor for the same open file (for a sync elsewhere); the caller closes it.
    func duplicateDescriptor() throws(SystemError) -> Int32 {
        try syscall("fcntl") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    /// Flush + full fsync before the file is published.
    func fullSync() throws(SystemError) {
        try flush()
        try syscall("fsync") { fsync(fd) }
        durableLength = length
    }

    var sha256Hex: String { hasher.hexDigest() }

    /// Bytes written to the file (readable by others): `length` less what is still buffered.
    var flushedLength: Int64 { length - Int64(buffered) }

    /// The open file's device and inode.
    func identity() throws(SystemError) -> FileIdentity {
        var st = stat()
        try syscall("fstat") { fstat(fd, &st) }
        return FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Flushes and closes the descriptor. Returns the bytes in the file and, when they are exactly
    /// what was hashed, the hasher state for a later in-process resume.
    func close() -> (hasher: SHA256Hasher?, length: Int64) {
        var intact = true
        if fd >= 0 {
            do { try flush() } catch { intact = false }
            Glibc.close(fd)
            fd = -1
        }
        return intact ? (hasher, length) : (nil, length - Int64(buffered))
    }
}
