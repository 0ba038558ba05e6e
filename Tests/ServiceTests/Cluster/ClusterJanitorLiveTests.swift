import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// The cluster janitor, live: engines in one process, each its own replica, on one real PostgreSQL
/// and one shared directory (as `ClusterLeaseLiveTests`). One replica at a time holds the janitor
/// lease and purges over every download in the database; a download another replica holds is never
/// purged under it; a dead janitor's lease is taken within TTL + TTL/3 + 1 s.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterJanitorLiveTests {
    typealias Live = ClusterLeaseLiveTests
    /// Twice the lease tests' TTL: renewals every TTL/3 that slipped on a loaded machine let a live
    /// janitor's lease lapse (a third epoch where the test expects two).
    static let ttl: Double = 2

    static func replica(_ owner: String, database: String, shared: URL, cacheTTL: Double? = nil, scheduler: Scheduler = SystemScheduler(),
                        configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = EngineConfiguration(root: shared)
        c.cacheTTL = cacheTTL
        c.pressureInterval = 0.25
        c.minFreeDiskBytes = 0
        c.clusterDatabase = try ClusterDatabase.connect(url: database, poolSize: 4, within: 5)
        c.clusterReplica = ClusterReplica(owner: owner, advertiseURL: "http://\(owner).invalid", leaseTTL: Self.ttl)
        configure(&c)
        return try DownloadEngine(configuration: c, driver: FakeTransferDriver(), scheduler: scheduler, diskPressure: .disabled)
    }

    /// Writes `download` as a replica that held its lease `key` and let it go (the way every row is written).
    static func seed(_ download: StoredDownload, key: String, _ store: PostgresStateStore) throws {
        let leases = LeaseStore(pool: store.pool)
        guard let grant = try leases.acquire(key: key, owner: "seeder", ownerURL: "http://seeder.invalid", ttl: 30) else {
            throw StateStoreError(kind: .other, message: "\(key) is held")
        }
        var row = download
        row.fence = LeaseFence(key: key, epoch: grant.epoch, partFile: EpochFiles.partial(id: row.id, epoch: grant.epoch))
        try store.commit(StateBatch(upserts: [row]))
        _ = try leases.release(key: key, epoch: grant.epoch)
    }

    static func purges(_ engine: DownloadEngine) -> Int64 { engine.statistics.purges.values.reduce(0, +) }

    static func janitors(_ engines: [DownloadEngine]) -> [Int] {
        engines.indices.filter { engines[$0].statistics.cluster?.janitor == true }  // What /metrics shows.
    }

    @Test func oneReplicaPurgesByRetentionOverTheDatabaseAndNeverADownloadAnotherHolds() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let shared = Live.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let recorder = StoryRecorder()
            let engines = try ["a", "b", "c"].map {
                try Self.replica($0, database: database, shared: shared, cacheTTL: 1) { $0.storyteller = recorder.tell }
            }
            defer { Live.shutdown(engines) }
            c.expect(Live.wait(5) { Self.janitors(engines).count == 1 }, "one janitor")
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 2))
            let cache = engines[0].configuration.cacheDirectory.path
            // Two completed cache files nobody asked for within the TTL; the second one's lease is held by a replica.
            let old = Date().addingTimeInterval(-60)
            var rows: [StoredDownload] = []
            for id in ["gone", "kept"] {
                var row = try ClusterReadsTests.completed(ClusterReadsTests.row(id, .paused, created: old.timeIntervalSince1970),
                                                          at: cache + "/\(id).1-\(id).bin")
                row.lastAccess = old
                row.tokens = [TokenHash(token: "tok-\(id)")]
                try Self.seed(row, key: "http://o.test/\(id)", store)
                rows.append(row)
            }
            let leases = LeaseStore(pool: store.pool)
            let holder = try c.require(try leases.acquire(key: "http://o.test/kept", owner: "other", ownerURL: "http://other.invalid", ttl: 30))

            c.expect(Live.wait(10) { (try? store.load(id: "gone")) == .some(nil) }, "the janitor removed the expired download")
            c.expect(Live.wait(5) { FileStore.fileSize(cache + "/gone.1-gone.bin") == nil }, "and its file")
            let tombstone = try c.require(store.loadTombstones().first)
            c.expect(tombstone.id == "gone" && tombstone.by == .retention && tombstone.paths.first == cache + "/gone.1-gone.bin")
            try c.expect(store.downloadID(ofToken: TokenHash(token: "tok-gone")) == nil)
            let counts = engines.map(Self.purges)
            c.expect(counts.filter { $0 > 0 }.count == 1 && counts.reduce(0, +) == 1, "one replica purged, once: \(counts)")
            let janitor = try c.require(counts.firstIndex { $0 > 0 })
            c.expect(engines[janitor].statistics.purges[PurgeCounterKey(kind: .cacheFile, reason: .ttl)] == 1)
            // Told as the single process tells it: the purge, then the removal by retention.
            c.expect(Live.wait(5) { recorder.events(of: "gone").count >= 2 })
            c.expect(recorder.events(of: "gone").map(\.name) == ["purged", "removed"], "\(recorder.events(of: "gone"))")
            for engine in engines {
                c.expect(engine.snapshot(id: "gone") == nil && engine.completedFile(id: "gone") == nil, "read as gone everywhere")
            }

            // Held by another replica: never purged under it, however long it waits; purged once let go.
            usleep(UInt32(2 * Self.ttl * 1_000_000))
            try c.expect(store.load(id: "kept") != nil && FileStore.fileSize(cache + "/kept.1-kept.bin") == 5, "held: untouched")
            try c.expect(leases.release(key: "http://o.test/kept", epoch: holder.epoch))
            c.expect(Live.wait(10) { (try? store.load(id: "kept")) == .some(nil) }, "let go: purged")
            // The purge is counted after its row is deleted.
            c.expect(Live.wait(5) { engines.map(Self.purges).reduce(0, +) == 2 }, "\(engines.map(Self.purges))")
        }
    }

    @Test func whenTheJanitorDiesAnotherReplicaTakesItsLeaseWithinTheTTLAndATurn() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let shared = Live.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let engines = try ["a", "b", "c"].map { try Self.replica($0, database: database, shared: shared) }
            defer { Live.shutdown(engines) }
            c.expect(Live.wait(5) { Self.janitors(engines).count == 1 }, "one janitor")
            // It stays one while it lives (renewed every TTL/3).
            for _ in 0..<10 {
                usleep(UInt32(Self.ttl / 5 * 1_000_000))
                c.expect(Self.janitors(engines).count <= 1, "never two at once: \(Self.janitors(engines))")
            }
            let first = try c.require(Self.janitors(engines).first)
            let died = Date()
            engines[first].core.clusterAbandonForTests()
            let bound = Self.ttl + Self.ttl / 3 + 1
            c.expect(Live.wait(bound + 2) { Self.janitors(engines).contains { $0 != first } }, "another replica is the janitor")
            let took = Date().timeIntervalSince(died)
            c.expect(took <= bound, "taken \(took) s after the janitor died (bound \(bound) s)")
            c.expect(Self.janitors(engines).count == 1)
            let row = try PostgresConnection(url: database, timeout: 5)
                .execute("SELECT owner, epoch FROM leases WHERE key = 'janitor' AND active AND expires_at > now()").rows.first
            c.expect(row?[0] != ["a", "b", "c"][first] && row?[1] == "2", "\(String(describing: row))")

            // A clean stop releases it: another takes it at its next turn.
            let second = try c.require(Self.janitors(engines).first)
            Live.shutdown([engines[second]])
            let stopped = Date()
            let holder = try PostgresConnection(url: database, timeout: 5)
                .execute("SELECT owner FROM leases WHERE key = 'janitor' AND active AND expires_at > now()").scalar
            c.expect(holder != ["a", "b", "c"][second], "released as it stopped, not left to lapse")
            c.expect(Live.wait(Self.ttl + 2) { Self.janitors(engines).contains { $0 != first && $0 != second } }, "the third takes it")
            c.expect(Date().timeIntervalSince(stopped) < Self.ttl, "at its next turn, without waiting for the TTL")
        }
    }

    @Test func thePausedTTLAndTheCacheBudgetPurgeAcrossTheDatabase() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let shared = Live.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            var config = EngineConfiguration(root: shared)
            config.pausedTTL = 30
            config.cacheMaxBytes = 3
            config.pressureInterval = 0.25
            config.clusterDatabase = try ClusterDatabase.connect(url: database, poolSize: 4, within: 5)
            config.clusterReplica = ClusterReplica(owner: "a", advertiseURL: "http://a.invalid", leaseTTL: Self.ttl)
            let engine = try DownloadEngine(configuration: config, driver: FakeTransferDriver(), scheduler: SystemScheduler(),
                                            diskPressure: .disabled)
            defer { Live.shutdown([engine]) }
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 2))
            let partials = engine.core.store.partialDirectory
            // An expired paused download with a partial (the lease row names its epoch's file), and a recent one.
            let hour = Date().timeIntervalSince1970 - 3600
            var expired = ClusterReadsTests.row("exp", .paused, created: hour, offset: 4)
            expired.updatedAt = Date(timeIntervalSince1970: hour)
            let recent = ClusterReadsTests.row("rec", .paused, created: Date().timeIntervalSince1970, offset: 0)
            let file = try ClusterReadsTests.completed(ClusterReadsTests.row("big", .paused, created: hour), at: engine.configuration.cacheDirectory.path + "/big.1-big.bin")
            // The partial first: the janitor may purge the row as soon as it is written.
            try Data("abcd".utf8).write(to: URL(fileURLWithPath: partials + "/exp.1.part"))
            for row in [expired, recent, file] { try Self.seed(row, key: "http://o.test/\(row.id)", store) }
            c.expect(Live.wait(10) { (try? store.load(id: "exp")) == .some(nil) && (try? store.load(id: "big")) == .some(nil) },
                     "the expired paused download and the file beyond the 3-byte budget went")
            c.expect(Live.wait(5) { FileStore.fileSize(partials + "/exp.1.part") == nil }, "with the partial its lease row named")
            try c.expect(store.load(id: "rec") != nil, "a recent paused download stays")
            // Counted once the purge's effects ran, which may be just after its row went.
            let counted = Live.wait(5) { engine.statistics.purges.values.reduce(0, +) >= 2 }
            let purges = engine.statistics.purges
            c.expect(counted && purges[PurgeCounterKey(kind: .pausedPartial, reason: .ttl)] == 1, "\(purges)")
            c.expect(purges[PurgeCounterKey(kind: .cacheFile, reason: .cacheLimit)] == 1, "\(purges)")
            try c.expect(store.loadTombstones().isEmpty, "purges forget; only removals leave tombstones")
        }
    }

    /// The real clock, a day ahead (an NTP step, a VM resumed): what the janitor replica reads as now.
    struct DayAheadScheduler: Scheduler {
        let base = SystemScheduler()
        func monotonic() -> Double { base.monotonic() }
        func now() -> Date { base.now().addingTimeInterval(86_400) }
        @discardableResult
        func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer { base.schedule(after: seconds, work) }
    }

    /// Ages are measured on the database's clock: a janitor whose own clock runs a day ahead purges
    /// neither a cache file asked for a minute ago nor a download paused a minute ago (every cache
    /// file and paused partial of the cluster went, for good, at its first sweep).
    @Test func aJanitorWhoseClockRunsADayAheadPurgesNothingYoung() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let shared = Live.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let engine = try Self.replica("a", database: database, shared: shared, cacheTTL: 3600, scheduler: DayAheadScheduler()) {
                $0.pausedTTL = 3600
            }
            defer { Live.shutdown([engine]) }
            c.expect(Live.wait(5) { Self.janitors([engine]) == [0] }, "the janitor")
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 2))
            let minuteAgo = Date().timeIntervalSince1970 - 60
            let paused = ClusterReadsTests.row("pau", .paused, created: minuteAgo, offset: 4)
            let cached = try ClusterReadsTests.completed(ClusterReadsTests.row("cac", .paused, created: minuteAgo),
                                                         at: engine.configuration.cacheDirectory.path + "/cac.1-cac.bin")
            try Data("abcd".utf8).write(to: URL(fileURLWithPath: engine.core.store.partialDirectory + "/pau.1.part"))
            for row in [paused, cached] { try Self.seed(row, key: "http://o.test/\(row.id)", store) }
            for _ in 0..<3 { engine.core.sweepCluster() }
            try c.expect(store.load(id: "pau") != nil && store.load(id: "cac") != nil, "nothing young was purged")
            c.expect(Self.purges(engine) == 0, "\(engine.statistics.purges)")
        }
    }
}
