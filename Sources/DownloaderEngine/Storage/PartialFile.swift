import Glibc

/// The partial download on disk: appends with write(2) loops and keeps an incremental SHA-256 of
/// everything in the file. Used from one thread at a time (the transfer's, or the engine's work queue).
final class PartialFile {
    let path: String
    private var fd: Int32
    /// Bytes in the file (and hashed).
    private(set) var length: Int64
    /// Bytes known to be on stable storage (after `sync()`).
    private(set) var durableLength: Int64
    private let hasher: SHA256Hasher

    /// Opens (creating) `path`, keeps at most `keep` bytes (dropping any tail), and hashes the
    /// kept bytes with a bounded buffer. `hasher`, when given, already covers exactly `keep`
    /// bytes of this file (an in-process resume) and saves the re-read.
    init(path: String, keep: Int64, hasher: SHA256Hasher? = nil, hashedLength: Int64? = nil) throws(SystemError) {
        self.path = path
        let fd = try retryingEINTR("open") { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        let kept: Int64
        let hasherInUse: SHA256Hasher
        do throws(SystemError) {
            var st = stat()
            try retryingEINTR("fstat") { fstat(fd, &st) }
            kept = max(0, min(keep, Int64(st.st_size)))
            if Int64(st.st_size) != kept {
                try retryingEINTR("ftruncate") { ftruncate(fd, off_t(kept)) }
            }
            if let hasher, hashedLength == kept {
                hasherInUse = hasher
            } else {
                hasherInUse = SHA256Hasher()
                try Self.hash(fd: fd, count: kept, into: hasherInUse)
            }
            try retryingEINTR("lseek") { lseek(fd, off_t(kept), SEEK_SET) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        self.hasher = hasherInUse
        length = kept
        durableLength = kept
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    private static func hash(fd: Int32, count: Int64, into hasher: SHA256Hasher) throws(SystemError) {
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < count {
            let want = Int(min(Int64(chunk), count - offset))
            let n = try retryingEINTR("pread") { pread(fd, buffer.baseAddress, want, off_t(offset)) }
            if n == 0 { throw SystemError(errno: EIO, function: "pread (file shrank)") }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += Int64(n)
        }
    }

    /// Appends all of `bytes` (looping over short writes) and hashes them.
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = try retryingEINTR("write") { write(fd, base + done, bytes.count - done) }
            done += n
        }
        hasher.update(bytes)
        length += Int64(bytes.count)
    }

    /// Drops every byte: the next append starts a new version of the file at 0.
    func truncateToZero() throws(SystemError) {
        try retryingEINTR("ftruncate") { ftruncate(fd, 0) }
        try retryingEINTR("lseek") { lseek(fd, 0, SEEK_SET) }
        hasher.reset()
        length = 0
        durableLength = 0
    }

    /// fdatasync: everything appended so far survives a crash.
    func sync() throws(SystemError) {
        try retryingEINTR("fdatasync") { fdatasync(fd) }
        durableLength = length
    }

    /// Full fsync before the file is published.
    func fullSync() throws(SystemError) {
        try retryingEINTR("fsync") { fsync(fd) }
        durableLength = length
    }

    var sha256Hex: String { hasher.hexDigest() }

    /// Closes the descriptor; the hasher state is handed back for a later in-process resume.
    func close() -> (hasher: SHA256Hasher, length: Int64) {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
        return (hasher, length)
    }
}
