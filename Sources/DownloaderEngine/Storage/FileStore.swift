import Basics
import Foundation
import Glibc

/// The three storage areas and the file operations between them: partials in the state area,
/// completed files in the cache or data area, atomic publication with fsync of file and directory.
struct FileStore: Sendable {
    let stateDirectory: String
    let partialDirectory: String
    let cacheDirectory: String
    let dataDirectory: String

    init(configuration: EngineConfiguration) throws(SystemError) {
        // Spelled one way (`/x/.` is `/x`): a file's stored path is compared with its area's as text.
        stateDirectory = configuration.stateDirectory.standardizedFileURL.path
        partialDirectory = configuration.stateDirectory.standardizedFileURL.appendingPathComponent("partials").path
        cacheDirectory = configuration.cacheDirectory.standardizedFileURL.path
        dataDirectory = configuration.dataDirectory.standardizedFileURL.path
        for dir in [stateDirectory, partialDirectory, cacheDirectory, dataDirectory] {
            try Self.makeDirectory(dir)
        }
        // One directory under two names would list each file twice at start-up: the cache's sweep
        // would delete the persistent files it saw unclaimed. The same path for both is fine.
        if cacheDirectory != dataDirectory, let cache = FileIdentity(directory: cacheDirectory),
           cache == FileIdentity(directory: dataDirectory) {
            throw SystemError(errno: EINVAL, function: "the cache area \(cacheDirectory) and the data area \(dataDirectory) are one "
                                  + "directory under two names (give both the same path, or two directories)")
        }
    }

    static func makeDirectory(_ path: String) throws(SystemError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw SystemError(errno: EACCES, function: "mkdir \(path)")
        }
    }

    /// Partials renamed aside for deletion end with this.
    static let trashSuffix = ".trash"

    func partialPath(id: String) -> String { partialDirectory + "/" + id + ".part" }

    func area(_ storage: StorageClass) -> String { storage == .cache ? cacheDirectory : dataDirectory }

    /// Where download `id` named `fileName` is stored: `<area>/<id>-<fileName>`.
    func finalPath(id: String, fileName: String, storage: StorageClass) -> String {
        area(storage) + "/" + id + "-" + fileName
    }

    /// Whether `path` is `finalPath(id:fileName:storage:)`, compared byte by byte in place (start-up
    /// asks it of every completed download: no string is built).
    func isFinalPath(_ path: String, id: String, fileName: String, storage: StorageClass) -> Bool {
        var (path, area, id, name) = (path, area(storage), id, fileName)
        guard path.utf8.count == area.utf8.count + id.utf8.count + name.utf8.count + 2 else { return false }
        return path.withUTF8 { whole in
            var rest = whole[...]
            func take(_ piece: UnsafeBufferPointer<UInt8>) -> Bool {
                defer { rest = rest.dropFirst(piece.count) }
                return rest.prefix(piece.count).elementsEqual(piece)
            }
            func take(_ byte: Character) -> Bool {
                defer { rest = rest.dropFirst() }
                return rest.first == byte.asciiValue
            }
            return area.withUTF8(take) && take("/") && id.withUTF8(take) && take("-") && name.withUTF8(take)
        }
    }

    /// Moves `from` to `to` atomically: rename; across file systems copy + fsync + rename, and the
    /// source goes only once the new name is durable. The target directory is fsynced; an I/O error
    /// there fails the move (the new name may not survive a crash) and undoes it: the file is back
    /// at `from` (the copy removed), never left in the area under a name nothing records.
    /// `rename` and `syncDirectory` are seams for tests.
    func publish(from: String, to: String,
                 rename renameCall: (String, String) -> Int32 = { Glibc.rename($0, $1) },
                 syncDirectory: (String) throws(SystemError) -> Void = FileStore.syncDirectoryReportingIO) throws(SystemError) {
        if renameCall(from, to) != 0 {
            let code = errno
            guard code == EXDEV else { throw SystemError(errno: code, function: "rename") }
            try Self.copyInto(from: from, to: to, rename: renameCall)
            do throws(SystemError) { try syncDirectory(to) } catch {
                unlink(to)
                throw error
            }
            unlink(from)
            return
        }
        do throws(SystemError) { try syncDirectory(to) } catch {
            if renameCall(to, from) != 0 { unlink(to) }
            throw error
        }
    }

    /// Makes `to` a durable second name of `from`, leaving `from` in place: a hard link, or a copy
    /// (copy + fsync + rename) across file systems or where links are refused. Any leftover at `to`
    /// is replaced. The target directory is fsynced afterwards. `link` is a seam for tests.
    func place(from: String, to: String,
               link linkCall: (String, String) -> Int32 = { Glibc.link($0, $1) }) throws(SystemError) {
        unlink(to)
        if linkCall(from, to) != 0 {
            let code = errno
            guard code == EXDEV || code == EPERM || code == EMLINK || code == ENOTSUP || code == ENOSYS else {  // ENOSYS: a FUSE volume's
                throw SystemError(errno: code, function: "link")
            }
            try Self.copyInto(from: from, to: to, rename: { Glibc.rename($0, $1) })
        }
        try Self.syncDirectoryReportingIO(of: to)
    }

    /// What a copy is named until it is whole (a crash may leave one: start-up sweeps them).
    static let copySuffix = ".tmp-copy"

    /// Copies `from` to a temporary name beside `to` (fsynced), then renames it to `to`.
    private static func copyInto(from: String, to: String,
                                 rename renameCall: (String, String) -> Int32) throws(SystemError) {
        let temp = to + copySuffix
        do throws(SystemError) {
            try copyFile(from: from, to: temp)
        } catch {
            unlink(temp)
            throw error
        }
        guard renameCall(temp, to) == 0 else {
            let e = errno
            unlink(temp)
            throw SystemError(errno: e, function: "rename")
        }
    }

    static func copyFile(from: String, to: String) throws(SystemError) {
        let input = try syscall("open") { open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        defer { Glibc.close(input) }
        // A fresh file, never through a symlink planted at `to`: whatever is there goes first.
        unlink(to)
        let output = try syscall("open") { open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        defer { Glibc.close(output) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        var copied: Int64 = 0
        while true {
            let n = try syscall("read") { read(input, buffer, size) }
            if n == 0 { break }
            try PageCacheWrites.write(output, buffer, count: n, at: copied)
            copied += Int64(n)
        }
        try syscall("fsync") { fsync(output) }
    }

    /// A descriptor of the file `fd` is open on, for a checkpoint's sync on another thread: a new
    /// open file (through `/proc/self/fd`), not a `dup`. Linux reports a failed writeback once per
    /// open file, so a checkpoint's sync on a duplicate would take the error away from the
    /// partial's own final sync; on a file of its own both hear it. A `dup` where `/proc` is missing.
    static func descriptorForSync(_ fd: Int32) -> Int32? {
        if let own = try? syscall("open", { open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC) }) { return own }
        return try? syscall("fcntl") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    /// fsync of the directory holding `path` (best effort: some file systems refuse).
    static func syncDirectory(of path: String) {
        _ = directorySync(of: path)
    }

    /// fsync of the directory holding `path`; throws only on EIO (a name in it may be lost), not
    /// where a file system refuses to sync directories.
    static func syncDirectoryReportingIO(of path: String) throws(SystemError) {
        let code = directorySync(of: path)
        if code == EIO { throw SystemError(errno: code, function: "fsync (directory)") }
    }

    /// The errno of the directory's fsync (0: it worked).
    private static func directorySync(of path: String) -> Int32 {
        let dir = (path as NSString).deletingLastPathComponent
        let fd = open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { Glibc.close(fd) }
        return fsync(fd) == 0 ? 0 : errno
    }

    /// The size of the regular file at `path`; nil when missing or anything else (a symlink
    /// included: a link planted in a storage area is never followed out of it).
    static func fileSize(_ path: String) -> Int64? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// Whether `path` is surely not a stored file of `size` bytes: nothing there (ENOENT), not a
    /// regular file, or another size. False when the stat failed otherwise (it may pass).
    static func isSurelyNot(_ path: String, size: Int64) -> Bool {
        var st = stat()
        guard lstat(path, &st) == 0 else { return errno == ENOENT || errno == ENOTDIR }
        return (st.st_mode & S_IFMT) != S_IFREG || Int64(st.st_size) != size
    }

    static func remove(_ path: String) { unlink(path) }

    /// Renames `path` to the first free name of `path + suffix`, `path + suffix + "-2"`, … (nothing
    /// kept aside earlier is ever replaced), fsyncs the directory, and returns the new name.
    /// `companions`: suffixes of files that belong with `path` (SQLite's `-wal`, `-shm`), set aside
    /// with it under the same name plus their suffix. All get their new names (links) durably before
    /// any old name goes, `path` first: a crash midway leaves every byte under one name or the other
    /// (a `-wal` left without its database would be deleted by the next open of a new one).
    static func setAside(_ path: String, suffix: String, companions: [String] = []) throws(SystemError) -> String {
        var target = path + suffix
        var n = 1
        while access(target, F_OK) == 0 || companions.contains(where: { access(target + $0, F_OK) == 0 }) {
            n += 1
            guard n <= 1000 else { throw SystemError(errno: EEXIST, function: "rename (no free name beside \(path))") }
            target = path + suffix + "-\(n)"
        }
        let present = [""] + companions.filter { access(path + $0, F_OK) == 0 }
        // Without companions, or where links are refused: renamed, `path` first.
        guard present.count > 1, link(path, target) == 0 else {
            for name in present { try syscall("rename") { rename(path + name, target + name) } }
            syncDirectory(of: path)
            return target
        }
        for name in present.dropFirst() {
            try syscall("link") { link(path + name, target + name) }
        }
        try syncDirectoryReportingIO(of: path)
        for name in present {
            try syscall("unlink") { unlink(path + name) }
        }
        syncDirectory(of: path)
        return target
    }
}
