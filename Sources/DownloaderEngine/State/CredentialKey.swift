import Basics
import CCrypto
import Glibc

/// The per-installation secret of the coalescing key's keyed hash: 32 random bytes in their own
/// file in the state area (`coalescing.key`, mode 0600), never in the state database or a log. The
/// hash of a caller's headers (HMAC-SHA256 under this key) is what the state store keeps; without
/// the key a stolen database cannot test guessed credentials against it.
struct CredentialKey: Sendable {
    static let fileName = "coalescing.key"
    static let length = 32
    private let key: [UInt8]

    init(bytes: [UInt8]) {
        key = bytes
    }

    /// Reads the key from `directory`, or makes it (from `random`) when there is none. A file of
    /// another length is refused: silently replacing it would split every stored credentialed
    /// download from its callers.
    ///
    /// Several processes may make it at once (cluster replicas starting together on a fresh shared
    /// directory): each writes its own temporary file and links it into place (`link(2)` never
    /// replaces), so one wins whole and the others read the winner's key. Where the filesystem
    /// has no hard links (vfat, many FUSE volumes), the key is made in place with `O_EXCL` (one
    /// wins) and a reader finding it short waits a moment for its writer. `link` is a seam for tests.
    static func loadOrCreate(directory: String, random: RandomSource,
                             link linkCall: (String, String) -> Int32 = { Glibc.link($0, $1) }) throws(SystemError) -> CredentialKey {
        let path = directory + "/" + fileName
        for _ in 0..<3 {
            if let key = try read(path) { return key }
            let bytes = random.bytes(length)
            let temporary = path + ".new." + random.hex(byteCount: 8)
            let out = try syscall("open \(temporary)") { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
            do throws(SystemError) {
                try syscall("fchmod") { fchmod(out, 0o600) }  // Whatever the umask.
                let written = try syscall("write") { bytes.withUnsafeBytes { write(out, $0.baseAddress, $0.count) } }
                guard written == bytes.count else { throw SystemError(errno: EIO, function: "write \(temporary) (short)") }
                try syscall("fsync") { fsync(out) }
                Glibc.close(out)
            } catch {
                Glibc.close(out)
                unlink(temporary)
                throw error
            }
            let linked = linkCall(temporary, path) == 0
            let failure = errno
            unlink(temporary)
            if linked {
                FileStore.syncDirectory(of: path)
                return CredentialKey(bytes: bytes)
            }
            if failure == EPERM || failure == EMLINK || failure == ENOTSUP || failure == ENOSYS {
                if try makeInPlace(path, bytes) { return CredentialKey(bytes: bytes) }
                continue  // Another process made it first: read its key.
            }
            guard failure == EEXIST else { throw SystemError(errno: failure, function: "link \(path)") }
        }
        throw SystemError(errno: EEXIST, function: "link \(path) (made and removed by others, three times)")
    }

    /// Writes `bytes` as the key at `path` unless a file is there already (false: another process
    /// made it; its key is read instead).
    private static func makeInPlace(_ path: String, _ bytes: [UInt8]) throws(SystemError) -> Bool {
        let out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard out >= 0 else {
            guard errno == EEXIST else { throw SystemError(errno: errno, function: "open \(path)") }
            return false
        }
        defer { Glibc.close(out) }
        do throws(SystemError) {
            try syscall("fchmod") { fchmod(out, 0o600) }
            let written = try syscall("write") { bytes.withUnsafeBytes { write(out, $0.baseAddress, $0.count) } }
            guard written == bytes.count else { throw SystemError(errno: EIO, function: "write \(path) (short)") }
            try syscall("fsync") { fsync(out) }
        } catch {
            unlink(path)  // Never used by anyone: a short key left here would refuse every later start.
            throw error
        }
        FileStore.syncDirectory(of: path)
        return true
    }

    /// The key in `path`; nil when there is no such file. A short file may be one another process
    /// is writing in place (a filesystem without hard links): read again for up to a second before
    /// it is refused.
    private static func read(_ path: String) throws(SystemError) -> CredentialKey? {
        for _ in 0..<50 {
            guard let (key, whole) = try readOnce(path) else { return nil }
            if whole { return key }
            usleep(20_000)
        }
        guard let (key, whole) = try readOnce(path) else { return nil }
        guard whole else { throw SystemError(errno: EINVAL, function: "read \(path) (not a \(length)-byte key)") }
        return key
    }

    /// One read of `path`: the key and whether it is whole (exactly `length` bytes); nil when there is no such file.
    private static func readOnce(_ path: String) throws(SystemError) -> (CredentialKey, Bool)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            guard errno == ENOENT else { throw SystemError(errno: errno, function: "open \(path)") }
            return nil
        }
        defer { Glibc.close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: length + 1, alignment: 1)
        defer { buffer.deallocate() }
        var got = 0
        while got < buffer.count {
            let n = try syscall("read") { Glibc.read(fd, buffer.baseAddress! + got, buffer.count - got) }
            if n == 0 { break }
            got += n
        }
        return (CredentialKey(bytes: Array(buffer.prefix(min(got, length)))), got == length)
    }

    /// HMAC-SHA256 (RFC 2104) of `message` under the key.
    func hash(_ message: [UInt8]) -> [UInt8] {
        let block = 64
        var padded = key.count > block ? Self.sha256(key) : key
        padded += [UInt8](repeating: 0, count: block - padded.count)
        let inner = Self.sha256(padded.map { $0 ^ 0x36 } + message)
        return Self.sha256(padded.map { $0 ^ 0x5c } + inner)
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        bytes.withUnsafeBytes { raw in
            _ = EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil)
        }
        return digest
    }
}
