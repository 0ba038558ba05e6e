// Cluster mode: what fences a removal.
extension EngineCore {
    /// Under `lock`: the fence of `record`'s lease for its removal (its row's deletion and its
    /// tombstone are written only while the epoch holds the lease); nil in a single process.
    func removalFence(of record: DownloadRecord) -> LeaseFence? {
        guard let hold = record.lease else { return nil }
        return LeaseFence(key: hold.key, epoch: hold.epoch, partFile: EpochFiles.partial(id: record.id, epoch: hold.epoch))
    }
}
