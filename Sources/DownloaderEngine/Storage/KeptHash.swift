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
/// time, which no caller can set back.
struct FileStamp: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let changedSeconds: Int
    let changedNanoseconds: Int

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        changedSeconds = st.st_ctim.tv_sec
        changedNanoseconds = st.st_ctim.tv_nsec
    }
}
