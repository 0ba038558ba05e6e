import Basics
import Foundation
import Glibc
import Synchronization

/// Cluster mode's part of the engine (nil in a single process): who this replica is, the leases it
/// keeps, and the downloads they cover. Invariant: every download in the engine's memory holds its
/// lease (`DownloadRecord.lease`); a download nobody holds lives only in the database.
final class EngineCluster: @unchecked Sendable {
    let replica: ClusterReplica
    let store: PostgresStateStore
    let leases: LeaseStore
    let keeper: LeaseKeeper
    /// The cluster-wide purges, on the replica holding the janitor lease.
    let janitor: ClusterJanitor
    /// One acquisition, adoption, takeover or release at a time on this replica: database round
    /// trips and the seeding of a partial happen under it, never under the engine's lock.
    let adoption = NSLock()
    /// Releases, takeovers and stopped leases are handled here, off the engine's lock and off the
    /// keeper's thread.
    let queue = DispatchQueue(label: "download-engine.cluster")
    let takeovers = Atomic<Int64>(0)
    /// Stopped leases and file writes refused by a lost lease (rows the database refused are
    /// `PostgresStateStore.fencedRows`).
    let fenced = Atomic<Int64>(0)
    let scanning = Atomic<Bool>(false)

    // Under the engine's lock.
    /// Leases granted for a key whose download is not created yet (a new URL's first request).
    var pending: [String: LeaseHold] = [:]
    /// The download each held lease covers, by lease key.
    var held: [String: DownloadRecord] = [:]
    /// Downloads forgotten on purpose (bounded failures, empty paused ones): their rows are deleted.
    /// Any other id the engine no longer knows was evicted (its row stays).
    var forgotten: Set<String> = []
    static let forgottenLimit = 10_000
    /// Told of every download evicted while the engine runs (an effect, after the download's earlier
    /// events), with its last row and, when completed, what a reader of its file sees: `ClusterReads`
    /// hands its subscribers over to the relay and remembers its file. Set once, at start.
    var evicted: (@Sendable (StoredDownload, TailState?) -> Void)?

    init(database: ClusterDatabase, replica: ClusterReplica, monotonic: @escaping @Sendable () -> Double) {
        self.replica = replica
        store = database.store
        leases = LeaseStore(pool: database.pool)
        keeper = LeaseKeeper(policy: LeasePolicy(ttl: replica.leaseTTL), store: leases, monotonic: monotonic)
        janitor = ClusterJanitor(leases: leases, replica: replica, monotonic: monotonic)
    }

    var statistics: ClusterStatistics {
        var s = ClusterStatistics()
        s.leasesHeld = keeper.count
        s.takeovers = takeovers.load(ordering: .relaxed)
        s.fencedWrites = fenced.load(ordering: .relaxed) + store.fencedRows.load(ordering: .relaxed)
        return s
    }
}

/// Seeds a new epoch's partial from the previous epoch's (`EpochFiles.Seed`).
enum EpochSeeding {
    /// Copies the first `length` bytes of `from` into `to` (replaced), fsynced. Returns the bytes
    /// copied: fewer when `from` is shorter, 0 when it is missing or unreadable (`to` then removed).
    static func copy(from: String, to: String, length: Int64) -> Int64 {
        unlink(to)
        guard length > 0, let source = try? Basics.syscall("open \(from)", { open(from, O_RDONLY | O_CLOEXEC) }) else { return 0 }
        defer { close(source) }
        guard let target = try? Basics.syscall("open \(to)", { open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }) else { return 0 }
        var copied: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var ok = true
        while copied < length {
            let want = Int(min(Int64(buffer.count), length - copied))
            let got = (try? buffer.withUnsafeMutableBytes { b in try Basics.syscall("read") { read(source, b.baseAddress, want) } }) ?? -1
            guard got > 0 else { ok = got == 0; break }
            var written = 0
            while written < got {
                let n = (try? buffer.withUnsafeBytes { b in try Basics.syscall("write") { write(target, b.baseAddress! + written, got - written) } }) ?? -1
                guard n > 0 else { ok = false; break }
                written += n
            }
            guard ok else { break }
            copied += Int64(got)
        }
        if ok { ok = (try? Basics.syscall("fsync") { fsync(target) }) != nil }
        close(target)
        guard ok else {
            unlink(to)
            return 0
        }
        return copied
    }
}
