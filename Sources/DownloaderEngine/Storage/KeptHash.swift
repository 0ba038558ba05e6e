import Dispatch
import Glibc

/// The hash of a closed partial's first `length` bytes, kept in memory so that an in-process
/// resume need not read them again; good only while the file is as it was closed (`stamp`): a
/// file changed meanwhile (outside the service) is read and hashed again, so the digest a download
/// completes with is always its file's.
struct KeptHash: @unchecked Sendable {
    let hasher: SHA256Hasher
    let length: Int64
    let stamp: FileStamp
}

/// A file as `fstat` saw it. Any write, truncation or change of its metadata moves its change
/// time, which no caller can set back: to a later value once the clock the kernel stamps files
/// with has passed the one the file holds (`settled`).
struct FileStamp: Equatable, Sendable {
    let identity: FileIdentity
    let size: Int64
    let changedSeconds: Int
    let changedNanoseconds: Int

    init(_ st: stat) {
        identity = FileIdentity(st)
        size = Int64(st.st_size)
        changedSeconds = st.st_ctim.tv_sec
        changedNanoseconds = st.st_ctim.tv_nsec
    }

    /// Longest `settled` waits for the kernel's file clock to tick past the file's change time.
    static let settleBound: UInt64 = 20_000_000

    /// The stamp of the open file `fd` that a later change cannot leave as it is, or nil. Before
    /// Linux 6.13 a change time comes from the coarse clock (a tick of 1-10 ms), and a change
    /// within the tick of the last one keeps it: so the stamp is taken only once that clock has
    /// passed the file's change time (waiting a tick at most). A change time of whole seconds
    /// (a file system that keeps no finer ones) would need up to two seconds: no stamp then.
    static func settled(_ fd: Int32, monotonic: () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) -> FileStamp? {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_ctim.tv_nsec != 0 else { return nil }
        let changed = (Int(st.st_ctim.tv_sec), Int(st.st_ctim.tv_nsec))
        let deadline = monotonic() + settleBound
        while true {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME_COARSE, &now)
            if (Int(now.tv_sec), Int(now.tv_nsec)) > changed { return FileStamp(st) }
            guard monotonic() < deadline else { return nil }
            usleep(500)
        }
    }
}

extension FileIdentity {
    /// The file `fstat` or `stat` described.
    init(_ st: stat) {
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// The directory at `path` (symlinks followed); nil when it is none.
    init?(directory path: String) {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        self.init(st)
    }
}
