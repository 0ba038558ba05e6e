import Basics
import Foundation
import Glibc

/// One service per state area (single process): an exclusive `flock` on `<state-dir>/lock`, held
/// while the service runs and dropped by the kernel when the process ends, however it ends (a
/// SIGKILL leaves no stale lock). A second service started on the same directory would keep row
/// numbers of its own, overwrite the first one's records and later sweep the files they named: it
/// is refused at start instead. Cluster replicas share their areas by design and take no lock.
final class StateDirectoryLock: Sendable {
    static let fileName = "lock"
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
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent(fileName).path
        let fd = try syscall("open \(path)") { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        let taken: Bool
        do throws(SystemError) {
            if case .processed = try nonBlockingSyscall("flock", { flock(fd, LOCK_EX | LOCK_NB) }) { taken = true } else { taken = false }
        } catch {
            close(fd)
            throw error
        }
        guard taken else {
            close(fd)
            throw ServiceStartError(message: "another download-service runs on the state directory \(directory.path) "
                                    + "(it holds \(path)); give each process its own --state-dir, or use cluster mode")
        }
        return StateDirectoryLock(descriptor: fd)
    }
}
