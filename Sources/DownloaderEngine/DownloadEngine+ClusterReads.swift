import Foundation
import Synchronization

/// Cluster mode: what the engine answers from the cluster database about downloads it does not
/// hold in memory (held by another replica, or by none): snapshots, the list, completed files in the
/// shared areas, caller tokens, privacy, and subscriptions relayed from the rows
/// (`SubscriptionRelay`). Asked only after the engine's own memory had no answer; a database that
/// does not answer reads as "unknown" (the service answers 503 while it is lost).
final class ClusterReads: Sendable {
    let reader: ClusterReader
    let relay: SubscriptionRelay
    /// Query parameters shown redacted (`coalesceIgnoreQuery`).
    let ignoring: Set<String>
    /// The areas completed files are served from (the shared directory's `cache` and `persistent`), each ending in `/`.
    let areas: [String]
    /// Completed downloads seen here, served while the database is unreachable (`DownloadEngine+KnownCompletions`).
    let known = Mutex(KnownCompletions())

    init(reader: ClusterReader, relay: SubscriptionRelay, ignoring: Set<String>, areas: [String]) {
        self.reader = reader
        self.relay = relay
        self.ignoring = ignoring
        self.areas = areas.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
    }

    /// The reads of `core`'s engine on `database`, or nil for the single process.
    convenience init?(core: EngineCore) {
        guard let database = core.configuration.clusterDatabase else { return nil }
        let reader = ClusterReader(pool: database.pool)
        let ignoring = core.configuration.coalesceIgnoreQuery
        self.init(reader: reader,
                  relay: SubscriptionRelay(source: reader, registry: core.subscribers, scheduler: core.scheduler, ignoring: ignoring),
                  ignoring: ignoring, areas: [core.store.cacheDirectory, core.store.dataDirectory])
    }

    func snapshot(id: String) -> DownloadSnapshot? {
        (try? reader.row(id: id))??.snapshot(ignoring: ignoring)
    }

    /// `local` (the engine's own, which win) with the database's newest downloads (in `state` when
    /// given), newest first. A download held here is left out of the rows whatever their state says.
    func list(merging local: [DownloadSnapshot], state: DownloadState? = nil, held: Set<String> = [],
              after position: ListPosition? = nil, limit: Int = ClusterReader.listLimit, includingPrivate: Bool = true) -> [DownloadSnapshot] {
        guard let rows = try? reader.newest(state: state, after: position, limit: limit, includingPrivate: includingPrivate) else { return local }
        let known = held.union(local.map(\.id))
        return (local + rows.lazy.filter { !known.contains($0.stored.id) }.map { $0.snapshot(ignoring: self.ignoring) })
            .sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id > $1.id }
    }

    /// `local` (the counts of the downloads `held` here) plus the database's counts of every other
    /// download (not asked while the database counts as lost: `/metrics` answers at once then).
    func stateCounts(merging local: [DownloadState: Int], held: [String]) -> [DownloadState: Int] {
        guard reader.pool.reachable, let others = try? reader.stateCounts(excluding: held) else { return local }
        return local.merging(others, uniquingKeysWith: +)
    }

    /// The file of a completed download, when its row names one in a shared area that is on disk
    /// with the recorded size (never a path outside the areas, never a symlink). While the database
    /// is unreachable: the file of a completed download seen here (`known`), on the same conditions.
    func completedFile(id: String) -> CompletedFile? {
        let found: ClusterRow?
        do throws(StateStoreError) {
            guard reader.pool.reachable else { return knownFile(id: id) }
            found = try reader.row(id: id)
        } catch {
            return knownFile(id: id)
        }
        guard let row = found, let entry = remember(row.stored) else {
            known.withLock { $0.forget(id) }
            return nil
        }
        return FileStore.fileSize(entry.file.path) == entry.file.size ? entry.file : nil
    }

    /// A completed download's row (not a private one's) is remembered, with what a reader of its
    /// file sees; nil (nothing remembered) for any other row.
    @discardableResult
    func remember(_ row: StoredDownload, tail: TailState? = nil) -> KnownCompletion? {
        guard row.state == .completed, let path = row.finalPath, let sha = row.sha256, let size = row.size, isInArea(path) else { return nil }
        let file = CompletedFile(path: path, fileName: row.fileName ?? FileNameSanitizer.fallback, size: size, sha256: sha,
                                 contentType: row.contentType, originETag: row.validator?.etag,
                                 originLastModified: row.validator?.lastModified)
        let record = DownloadRecord(stored: row, tau: 1, progressInterval: 0, ignoring: ignoring)
        guard !record.isCredentialed else { return nil }
        let entry = KnownCompletion(id: row.id, leaseKey: record.key.leaseName, file: file,
                                    tail: tail ?? record.tailState(partialPath: ""))
        known.withLock { $0.remember(entry) }
        return entry
    }

    /// The remembered file of download `id`, while on disk with its size.
    func knownFile(id: String) -> CompletedFile? {
        guard let file = known.withLock({ $0.entry(id: id) })?.file, FileStore.fileSize(file.path) == file.size else { return nil }
        return file
    }

    /// The engine evicted `row`'s download (`EngineCluster.evicted`): its subscribers here follow it
    /// through the relay from now on, and a completed one's file is remembered.
    func evicted(_ row: StoredDownload, completed tail: TailState?) {
        relay.handOver(id: row.id, view: RelayDiff.View(ClusterRow(stored: row), ignoring: ignoring))
        if tail != nil { remember(row, tail: tail) }
    }

    /// `path` is a file directly inside one of the areas (no `..`, no subdirectory).
    func isInArea(_ path: String) -> Bool {
        areas.contains { area in
            guard path.hasPrefix(area) else { return false }
            let name = path.dropFirst(area.count)
            return !name.isEmpty && !name.contains("/") && name != "." && name != ".."
        }
    }

    func isCaller(_ hash: TokenHash, of id: String) -> Bool {
        (try? reader.downloadID(of: hash)) == id
    }

    /// Which of `tokens` are live in the database.
    func liveTokens(among tokens: [(String, TokenHash)]) -> Set<String> {
        guard let live = try? reader.liveTokens(among: tokens.map(\.1)) else { return [] }
        return Set(tokens.filter { live.contains($0.1) }.map(\.0))
    }

    /// Whether row `id` is credentialed (no row: no). A read that failed is no answer, except for a
    /// download known complete (`KnownCompletions` holds no private one).
    func isPrivate(id: String) throws(EngineError) -> Bool {
        do throws(StateStoreError) {
            return try reader.row(id: id)?.stored.credentialKey != nil
        } catch {
            guard known.withLock({ $0.entry(id: id) }) != nil else { throw .databaseUnavailable() }
            return false
        }
    }

    /// A subscription relayed from the row of download `id`; nil when there is none.
    func subscribe(id: String) -> DownloadSubscription? {
        guard let row = (try? reader.row(id: id)) ?? nil else { return nil }
        return DownloadSubscription(queue: relay.subscribe(row))
    }
}

extension DownloadEngine {
    /// Cluster mode's answer for `id`, when the engine does not hold it.
    func clusterSnapshot(id: String) -> DownloadSnapshot? { clusterReads?.snapshot(id: id) }

    /// The list with the database's downloads (cluster mode; in `state` when given), or `local` as it is.
    /// `held`: every download the engine holds (those in another state than `state` among them).
    func clusterList(merging local: [DownloadSnapshot], state: DownloadState? = nil, held: Set<String> = [],
                     after position: ListPosition? = nil, limit: Int = ClusterReader.listLimit,
                     includingPrivate: Bool = true) -> [DownloadSnapshot] {
        clusterReads?.list(merging: local, state: state, held: held, after: position, limit: limit, includingPrivate: includingPrivate)
            ?? local
    }

    func clusterCompletedFile(id: String) -> CompletedFile? { clusterReads?.completedFile(id: id) }

    /// A relayed subscription (cluster mode), unless the engine is shutting down.
    func clusterSubscribe(id: String) -> DownloadSubscription? {
        guard let clusterReads, !core.locked({ core.shuttingDown }) else { return nil }
        return clusterReads.subscribe(id: id)
    }
}
