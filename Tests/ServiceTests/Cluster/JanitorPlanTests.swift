import Foundation
import Testing
@testable import DownloaderEngine

/// The cluster janitor's decisions, pure: the single process's purges and their order, over rows
/// of the whole database; one action per download.
@Suite struct JanitorPlanTests {
    static let now = Date(timeIntervalSince1970: 2_000_000)

    static func row(_ id: String, _ state: DownloadState, kept: Int64 = 0, size: Int64? = nil, age: Double = 10,
                    held: Bool = false, tokens: Int = 0) -> JanitorRow {
        JanitorRow(id: id, leaseKey: "http://o.test/\(id)", url: "http://o.test/\(id)", state: state, storage: .cache, keptBytes: kept,
                   size: size, finalPath: size.map { _ in "/shared/cache/\(id).1-f" }, updatedAt: now.addingTimeInterval(-age),
                   lastAccess: now.addingTimeInterval(-age), held: held, tokens: tokens)
    }

    static func plan(_ configure: (inout EngineConfiguration) -> Void = { _ in }) -> JanitorPlan {
        var c = EngineConfiguration(root: URL(fileURLWithPath: "/nonexistent"))
        configure(&c)
        return JanitorPlan(c, diskPressure: DiskPressure(minFreeBytes: 1000, minFreeFraction: 0))
    }

    static func shown(_ actions: [JanitorAction]) -> [String] {
        actions.map { action in
            switch action {
            case .purgePartial(let row, let reason, let forget): "partial \(row.id) \(reason.rawValue)\(forget ? " forget" : "")"
            case .purgeCacheFile(let row, let reason): "file \(row.id) \(reason.rawValue)"
            case .expire(let row): "expire \(row.id)"
            case .forget(let row): "forget \(row.id)"
            }
        }
    }

    @Test func theCacheBudgetTakesPausedPartialsOldestFirstThenLeastRecentlyUsedFiles() {
        let plan = Self.plan { $0.cacheMaxBytes = 500 }
        var survey = JanitorSurvey()
        survey.idle = [Self.row("p-old", .paused, kept: 300, age: 50), Self.row("f-new", .failed, kept: 200, age: 5)]
        survey.idleBytes = 500
        survey.cacheFiles = [Self.row("c-lru", .completed, size: 400, age: 40), Self.row("c-mru", .completed, size: 400, age: 1)]
        survey.cacheBytes = 800
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: nil))
                == ["partial p-old cache_limit", "partial f-new cache_limit", "file c-lru cache_limit"], "1300 → 400")
        survey.cacheBytes = 400
        survey.cacheFiles.removeLast()
        #expect(Self.shown(Self.plan { $0.cacheMaxBytes = 900 }.actions(survey, now: Self.now, memory: false, disk: nil)).isEmpty,
                "900 is within 900")
    }

    /// What alone is larger than the whole budget goes first, and alone (as in the single process).
    @Test func aFileLargerThanTheWholeBudgetGoesAloneAndFirst() {
        let plan = Self.plan { $0.cacheMaxBytes = 500 }
        var survey = JanitorSurvey()
        survey.idle = [Self.row("p-old", .paused, kept: 200, age: 50)]
        survey.idleBytes = 200
        survey.cacheFiles = [Self.row("c-lru", .completed, size: 200, age: 40), Self.row("c-big", .completed, size: 900, age: 1)]
        survey.cacheBytes = 1100
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: nil)) == ["file c-big cache_limit"])
    }

    @Test func aLowDiskPurgesUntilTheSpaceIsBack() {
        let plan = Self.plan()
        var survey = JanitorSurvey()
        survey.idle = [Self.row("p1", .paused, kept: 300), Self.row("p2", .paused, kept: 300)]
        survey.cacheFiles = [Self.row("c1", .completed, size: 500), Self.row("c2", .completed, size: 500)]
        let disk = DiskSpace(free: 200, total: 1 << 40, fileSystem: 1)
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: disk))
                == ["partial p1 disk", "partial p2 disk", "file c1 disk"], "200 + 600 + 500 ≥ 1000")
        #expect(plan.actions(survey, now: Self.now, memory: false, disk: DiskSpace(free: 5000, total: 1 << 40, fileSystem: 1)).isEmpty)
    }

    /// A shared volume reporting ~8 EiB free (network file systems do): the space counted back
    /// after each purge stays a number; it used to overflow and trap in the cache budget's pass.
    @Test func aVolumeReportingAlmostInt64MaxFreeNeverTraps() {
        let plan = Self.plan { $0.cacheMaxBytes = 1 }
        var survey = JanitorSurvey()
        survey.idle = [Self.row("p1", .paused, kept: 8 << 20)]
        survey.idleBytes = 8 << 20
        survey.cacheFiles = [Self.row("c1", .completed, size: 8 << 20)]
        survey.cacheBytes = 8 << 20
        let huge = Int64.max - (1 << 20) + 1
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: DiskSpace(free: huge, total: huge, fileSystem: 1)))
                == ["partial p1 cache_limit", "file c1 cache_limit"])
        #expect(DiskSpace.bytes(1 << 62, 4096) == .max && DiskSpace.bytes(UInt64.max, 1) == .max && DiskSpace.bytes(3, 4096) == 12_288)
    }

    @Test func thePausedTTLTakesExpiredPartialsAndForgetsEmptyOnesWithoutCallers() {
        let plan = Self.plan { $0.pausedTTL = 100 }
        var survey = JanitorSurvey()
        survey.expiredPaused = [Self.row("kept", .paused, kept: 10, age: 200, tokens: 2), Self.row("empty", .paused, age: 200),
                                Self.row("called", .paused, age: 200, tokens: 1), Self.row("held", .paused, kept: 10, age: 200, held: true),
                                Self.row("young", .paused, kept: 10, age: 50)]
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: nil)) == ["partial kept ttl forget", "forget empty"])
    }

    @Test func boundsForgetTheOldestFailuresAndEmptyPausedDownloadsBeyondTheirNumber() {
        let plan = Self.plan {
            $0.maxFailedDownloads = 2
            $0.failedRetention = 1000
            $0.maxEmptyPausedDownloads = 1
        }
        var survey = JanitorSurvey()
        survey.failed = [Self.row("f1", .failed, age: 5000), Self.row("f2", .failed, age: 30), Self.row("f3", .failed, age: 20),
                         Self.row("f4", .failed, age: 10)]
        survey.failedCount = 4
        survey.emptyPaused = [Self.row("e1", .paused, age: 9), Self.row("e2", .paused, age: 8)]
        survey.emptyPausedCount = 2
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: nil)) == ["forget e1", "forget f1", "forget f2"])
    }

    @Test func retentionExpiresCacheFilesNotAskedForWithinTheTTLOnceEach() {
        let plan = Self.plan {
            $0.cacheTTL = 60
            $0.cacheMaxBytes = 100
        }
        var survey = JanitorSurvey()
        let old = Self.row("old", .completed, size: 500, age: 100)
        survey.cacheFiles = [old]
        survey.cacheBytes = 500
        survey.expiredCache = [old, Self.row("older", .completed, size: 5, age: 90), Self.row("recent", .completed, size: 5, age: 30)]
        #expect(Self.shown(plan.actions(survey, now: Self.now, memory: false, disk: nil)) == ["file old cache_limit", "expire older"],
                "one action per download; a file asked for within the TTL stays")
        #expect(Self.shown(Self.plan().actions(survey, now: Self.now, memory: false, disk: nil)).isEmpty, "no --cache-ttl, no budget")
    }
}
