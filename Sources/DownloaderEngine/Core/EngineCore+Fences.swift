import Basics
import Glibc

// Cluster mode: what fences a removal, a body write and a row write.
extension EngineCore {
    /// Under `lock`: the fence of `record`'s lease for its removal (its row's deletion and its
    /// tombstone are written only while the epoch holds the lease); nil in a single process.
    func removalFence(of record: DownloadRecord) -> LeaseFence? {
        guard let hold = record.lease else { return nil }
        return LeaseFence(key: hold.key, epoch: hold.epoch, partFile: EpochFiles.partial(id: record.id, epoch: hold.epoch))
    }

    /// Before a body write under `lease` (transfer thread; the prefix's and every segment's): once
    /// the lease may no longer write (its local deadline passed, or it stopped) the write is refused
    /// and the lease stops (a fenced write, counted once).
    func checkWrite(under lease: LeaseHold?) throws(SystemError) {
        guard let lease, !lease.mayWrite(now: clock.monotonic()) else { return }
        writeFenced(lease)
        throw SystemError(errno: EPERM, function: "write (the download's lease was lost)")
    }

    /// A body write was refused because `hold` may no longer write (transfer thread, or a crew's
    /// writer queue).
    func writeFenced(_ hold: LeaseHold) {
        guard let cluster, hold.stop() else { return }
        cluster.queue.async { [weak self] in self?.leaseStopped(hold) }
    }

    /// Under `lock`, taking a batch for the state writer: the row of `record`, fenced by its lease;
    /// nil when its lease may no longer write (counted).
    func batchRow(of record: DownloadRecord) -> StoredDownload? {
        var row = record.stored()
        guard let hold = record.lease else { return row }
        guard hold.mayWrite(now: clock.monotonic()) else {
            cluster?.fenced.add(1, ordering: .relaxed)
            return nil
        }
        row.fence = LeaseFence(key: hold.key, epoch: hold.epoch, partFile: EpochFiles.partial(id: record.id, epoch: hold.epoch))
        return row
    }
}
