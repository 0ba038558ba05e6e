import Foundation
import Glibc

// Cluster mode: the janitor's sweep of files in the shared areas that no row names (`OrphanSweep`):
// a replica that died between making a file and recording it, a takeover's seed source left by a
// crash, a deletion a crash interrupted, the files of a removal whose remover crashed. The single
// process sweeps these at start-up; in a cluster no replica may sweep at start (another one may be
// writing), so the janitor does, and deletes only what is older than a safe age.
extension EngineCore {
    /// Janitor queue, while this replica is the janitor: one sweep. The areas are listed before the
    /// rows are read, so a listed file was made before the read; one whose status changed since the
    /// safe age began was recorded long before, if it was to be. Returns the files deleted.
    @discardableResult
    func sweepOrphans() -> Int {
        guard let cluster, cluster.janitor.isJanitor else { return 0 }
        let areas: [(OrphanSweep.Area, String)] = [(.partial, store.partialDirectory), (.cache, store.cacheDirectory),
                                                   (.data, store.dataDirectory)]
        let listed = areas.map { ($0.0, $0.1, (try? FileManager.default.contentsOfDirectory(atPath: $0.1)) ?? []) }
        guard let (rows, tombstoned) = try? cluster.janitor.store.fileOwners(cacheDirectory: store.cacheDirectory,
                                                                                  dataDirectory: store.dataDirectory) else { return 0 }
        let now = ageing.now(clock).timeIntervalSince1970
        var deleted = 0
        for (area, directory, names) in listed {
            for name in names {
                let verdict = OrphanSweep.verdict(name, in: area, rows: rows, tombstoned: tombstoned)
                guard verdict != .keep else { continue }
                let path = directory + "/" + name
                guard let changed = Self.statusChange(path) else { continue }
                if verdict == .deleteIfOld && now - changed < configuration.orphanMinimumAge { continue }
                guard cluster.janitor.isJanitor, !locked({ shuttingDown }) else { return deleted }
                FileStore.remove(path)
                deleted += 1
            }
        }
        return deleted
    }

    /// When `path`'s status last changed (ctime: a write, a rename into place), seconds since 1970;
    /// nil when it is not a regular file.
    static func statusChange(_ path: String) -> Double? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9
    }
}
