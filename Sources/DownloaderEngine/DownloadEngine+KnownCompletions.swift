import Foundation

// Cluster mode while the database is unreachable: files already known complete are still served
// (`KnownCompletions`); everything else that needs the database answers 503.
extension DownloadEngine {
    /// A completed download of `url` (fetched without caller headers) this replica has seen, and
    /// what a reader of its file sees, while its file is on disk with its size; nil in a single
    /// process. Asks no database: for answering while it is unreachable.
    public func knownCompletion(url: String) -> (id: String, state: TailState)? {
        guard let clusterReads,
              let normalized = try? URLNormalizer.normalize(url, allowCredentials: configuration.allowURLCredentials).get() else { return nil }
        let key = core.coalescingKey(url: normalized, headers: nil).leaseName
        guard let entry = clusterReads.known.withLock({ $0.entry(leaseKey: key) }),
              clusterReads.knownFile(id: entry.id) != nil else { return nil }
        return (entry.id, entry.tail)
    }
}
