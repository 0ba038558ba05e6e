import Foundation

/// A download as the cluster janitor sees it (`JanitorStore`): what the purges decide on.
struct JanitorRow: Sendable, Equatable {
    var id: String
    var leaseKey: String?
    var url: String
    var state: DownloadState
    var storage: StorageClass
    /// Bytes of the partial known durable (`verified_offset`): what purging the partial frees.
    var keptBytes: Int64
    var size: Int64?
    var finalPath: String?
    var updatedAt: Date
    var lastAccess: Date
    var held: Bool
    var tokens: Int
}

/// What the janitor found in the database: the candidates of each purge (oldest or least recently
/// used first, each list bounded by `JanitorStore.batch`) and the totals the budgets are measured on.
struct JanitorSurvey: Sendable, Equatable {
    /// Paused or failed downloads that keep bytes, oldest first, and the bytes all of them keep.
    var idle: [JanitorRow] = []
    var idleBytes: Int64 = 0
    /// Completed downloads in the cache area, least recently used first, and their bytes.
    var cacheFiles: [JanitorRow] = []
    var cacheBytes: Int64 = 0
    /// Paused downloads not held by the operator, last changed before the paused TTL's cutoff.
    var expiredPaused: [JanitorRow] = []
    /// Paused downloads that keep nothing and have no caller nor hold, oldest first, and how many there are.
    var emptyPaused: [JanitorRow] = []
    var emptyPausedCount = 0
    /// Failed downloads, oldest first, and how many there are.
    var failed: [JanitorRow] = []
    var failedCount = 0
    /// Completed cache files not requested since the `--cache-ttl` cutoff, least recently used first.
    var expiredCache: [JanitorRow] = []
    /// The earlier of the database's clock and the janitor replica's when the survey was read:
    /// every age is measured on it, so that no one clock running ahead (stepped a day ahead, say)
    /// decides what the whole cluster purges.
    var now = Date(timeIntervalSince1970: 0)
}

/// One purge the janitor carries out on a download nobody holds.
enum JanitorAction: Sendable, Equatable {
    /// The partial goes (a `paused_partial` purge); `forget`: the download goes too.
    case purgePartial(JanitorRow, PurgeReason, forget: Bool)
    /// A completed cache file goes with its download (a `cache_file` purge).
    case purgeCacheFile(JanitorRow, PurgeReason)
    /// `--cache-ttl`: the download is removed by retention, with a tombstone (a `cache_file` purge, `ttl`).
    case expire(JanitorRow)
    /// A bound on what is remembered (failures, empty paused downloads): the download goes, with any partial.
    case forget(JanitorRow)

    var row: JanitorRow {
        switch self {
        case .purgePartial(let row, _, _), .purgeCacheFile(let row, _), .expire(let row), .forget(let row): row
        }
    }
}

/// The single process's purges (`EngineCore+Pressure`, `+Forgetting`, `+Operator`), decided over the
/// whole cluster database instead of one engine's memory, in the same order: memory pressure and low
/// disk (paused partials oldest first, then least recently used cache files), the paused TTL, the
/// cache budget, the bounds on failures and empty paused downloads, and `--cache-ttl` retention. A
/// download gets one action at most. Pure: time, samples and rows are arguments.
struct JanitorPlan: Sendable {
    var cacheMaxBytes: Int64?
    var pausedTTL: Double
    var cacheTTL: Double?
    var failedRetention: Double
    var maxFailedDownloads: Int
    var maxEmptyPausedDownloads: Int
    var diskPressure: DiskPressure

    init(_ c: EngineConfiguration, diskPressure: DiskPressure) {
        cacheMaxBytes = c.cacheMaxBytes
        pausedTTL = c.pausedTTL
        cacheTTL = c.cacheTTL
        failedRetention = c.failedRetention
        maxFailedDownloads = c.maxFailedDownloads
        maxEmptyPausedDownloads = c.maxEmptyPausedDownloads
        self.diskPressure = diskPressure
    }

    /// Cutoffs the survey is read with.
    func pausedCutoff(now: Date) -> Date { now.addingTimeInterval(-max(0, pausedTTL)) }
    func cacheCutoff(now: Date) -> Date? { cacheTTL.flatMap { $0 > 0 ? now.addingTimeInterval(-$0) : nil } }

    /// The purges `survey` calls for at `now`, with memory under pressure or not and the shared
    /// areas' free space (`disk`, nil when unknown).
    func actions(_ survey: JanitorSurvey, now: Date, memory: Bool, disk: DiskSpace?) -> [JanitorAction] {
        var actions: [JanitorAction] = []
        var done = Set<String>()
        var idleBytes = survey.idleBytes
        var cacheBytes = survey.cacheBytes
        var free = disk?.free ?? 0
        func take(_ action: JanitorAction) {
            done.insert(action.row.id)
            actions.append(action)
        }
        func low() -> Bool { disk.map { diskPressure.isLow(free: free, total: $0.total) } ?? false }
        func purgeIdle(_ reason: PurgeReason, only eligible: (JanitorRow) -> Bool = { _ in true }, while more: () -> Bool) {
            for row in survey.idle where !done.contains(row.id) && eligible(row) && more() {
                take(.purgePartial(row, reason, forget: false))
                idleBytes -= row.keptBytes
                if disk != nil { free = DiskSpace.adding(row.keptBytes, to: free) }
            }
        }
        func purgeCache(_ reason: PurgeReason, only eligible: (JanitorRow) -> Bool = { _ in true }, while more: () -> Bool) {
            for row in survey.cacheFiles where !done.contains(row.id) && eligible(row) && more() {
                take(.purgeCacheFile(row, reason))
                cacheBytes -= row.size ?? 0
                if disk != nil { free = DiskSpace.adding(row.size ?? 0, to: free) }
            }
        }
        // Pressure.
        if memory { purgeIdle(.memory) { true } }
        if memory, let limit = cacheMaxBytes { purgeCache(.memory) { idleBytes + cacheBytes > limit } }
        if low() {
            purgeIdle(.disk, while: low)
            purgeCache(.disk, while: low)
        }
        // The paused TTL: expired partials go with their downloads; expired empty ones without callers too.
        let pausedCutoff = pausedCutoff(now: now)
        for row in survey.expiredPaused where !done.contains(row.id) && !row.held && row.updatedAt < pausedCutoff {
            if row.keptBytes > 0 {
                take(.purgePartial(row, .ttl, forget: true))
                idleBytes -= row.keptBytes
            } else if row.tokens == 0 {
                take(.forget(row))
            }
        }
        // The cache budget: what alone is larger than all of it goes first, and alone (it never fits).
        if let limit = cacheMaxBytes {
            purgeIdle(.cacheLimit, only: { $0.keptBytes > limit }) { idleBytes + cacheBytes > limit }
            purgeCache(.cacheLimit, only: { ($0.size ?? 0) > limit }) { idleBytes + cacheBytes > limit }
            purgeIdle(.cacheLimit) { idleBytes + cacheBytes > limit }
            purgeCache(.cacheLimit) { idleBytes + cacheBytes > limit }
        }
        // Bounds: empty paused downloads beyond their number, failures beyond theirs or their retention.
        var emptyKept = survey.emptyPausedCount
        for row in survey.emptyPaused where emptyKept > max(0, maxEmptyPausedDownloads) {
            emptyKept -= 1
            if !done.contains(row.id) { take(.forget(row)) }
        }
        let failedCutoff = now.addingTimeInterval(-max(0, failedRetention))
        var failedKept = survey.failedCount
        for row in survey.failed where failedKept > max(1, maxFailedDownloads) || row.updatedAt < failedCutoff {
            failedKept -= 1
            if !done.contains(row.id) { take(.forget(row)) }
        }
        // Retention: completed cache files not requested within `--cache-ttl`.
        if let cutoff = cacheCutoff(now: now) {
            for row in survey.expiredCache where !done.contains(row.id) && row.state == .completed && row.storage == .cache
                && row.lastAccess <= cutoff {
                take(.expire(row))
            }
        }
        return actions
    }
}
