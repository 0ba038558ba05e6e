import Foundation

// Cluster mode while the database is unreachable: files already known complete are still served
// (`KnownCompletions`); everything else that needs the database answers 503.
extension DownloadEngine {
    /// A completed download of `request`'s URL (fetched without caller headers) this replica has
    /// seen, and what a reader of its file sees, while its file is on disk with its size; nil in a
    /// single process, and when the request's `sha256` or `size` is not the file's (whether another
    /// stored file has them only the database says). Asks no database: for answering while it is
    /// unreachable.
    public func knownCompletion(_ request: DownloadRequest) -> (id: String, state: TailState)? {
        guard let clusterReads, request.headers.isEmpty,
              let normalized = try? URLNormalizer.normalize(request.url, allowCredentials: configuration.allowURLCredentials).get() else { return nil }
        let sha: String?
        do { sha = try EngineCore.normalizedSHA256(request.sha256) } catch { return nil }
        let key = core.coalescingKey(url: normalized, headers: nil).leaseName
        guard let entry = clusterReads.known.withLock({ $0.entry(leaseKey: key) }),
              sha == nil || entry.file.sha256 == sha, request.size == nil || entry.file.size == request.size,
              clusterReads.knownFile(id: entry.id) != nil else { return nil }
        return (entry.id, entry.tail)
    }
}
