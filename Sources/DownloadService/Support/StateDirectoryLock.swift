import Basics
import Foundation
import Glibc

/// One service per storage area (single process): an exclusive `flock` on `<state-dir>/lock` (and
/// on `.download-service.lock` in the cache and data directories), held while the service runs and
/// dropped by the kernel when the process ends, however it ends (a SIGKILL leaves no stale lock).
/// A second service started on the same state directory would keep row numbers of its own,
/// overwrite the first one's records and later sweep the files they named; one with a state
/// directory of its own but the same cache or data directory would sweep the first one's files at
/// its start (none of its rows names them). Either is refused at start instead. Cluster replicas
/// share their areas by design and take no lock.
final class StateDirectoryLock: Sendable {
    static let fileName = "lock"
    /// The lock file of a cache or data directory (hidden: the data area is the operator's to browse).
    static let areaFileName = ".download-service.lock"
    private let descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)  // Drops the lock (a service stopped in-process; a process's end drops it anyway).
    }

    /// Takes the lock of `directory` (created 0700 when missing), or throws when another process
    /// holds it or the lock file cannot be opened.
    static func acquire(_ directory: URL) throws -> StateDirectoryLock {
        try acquire(directory, fileName: fileName, area: "state directory", option: "--state-dir")
    }

    /// Locks of the cache and data directories (each once, also when they are one), besides the
    /// state directory's. A directory whose filesystem takes no locks (NFSv3 without lockd:
    /// ENOLCK) is not refused: it is named in `unlockable` (the caller warns) and left unlocked.
    static func acquireAreas(_ directories: [(option: String, directory: URL)],
                             flockCall: (Int32, Int32) -> Int32 = { flock($0, $1) }) throws
        -> (locks: [StateDirectoryLock], unlockable: [String]) {
        var seen: Set<String> = []
        var locks: [StateDirectoryLock] = []
        var unlockable: [String] = []
        for (option, directory) in directories where seen.insert(directory.standardizedFileURL.resolvingSymlinksInPath().path).inserted {
            do {
                locks.append(try acquire(directory, fileName: areaFileName, area: "directory of \(option)", option: option, flockCall: flockCall))
            } catch let error as SystemError where [ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL].contains(error.errno) {
                unlockable.append(directory.path)
            }
        }
        return (locks, unlockable)
    }

    private static func acquire(_ directory: URL, fileName: String, area: String, option: String,
                                flockCall: (Int32, Int32) -> Int32 = { flock($0, $1) }) throws -> StateDirectoryLock {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent(fileName).path
        let fd = try syscall("open \(path)") { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        let taken: Bool
        do throws(SystemError) {
            if case .processed = try nonBlockingSyscall("flock", { flockCall(fd, LOCK_EX | LOCK_NB) }) { taken = true } else { taken = false }
        } catch {
            close(fd)
            throw error
        }
        guard taken else {
            close(fd)
            throw ServiceStartError(message: "another download-service runs on the \(area) \(directory.path) "
                                    + "(it holds \(path)); give each process its own \(option), or use cluster mode")
        }
        return StateDirectoryLock(descriptor: fd)
    }
}
