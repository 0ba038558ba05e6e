import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// Leases wired into the engine, live: several engines in one process, each its own replica (owner,
/// pool), sharing one directory and one real PostgreSQL, fetching from a throttled local origin.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterLeaseLiveTests {
    static let ttl: Double = 1
    static var throttled: TestOrigin.Settings {
        var settings = TestOrigin.Settings()
        settings.bytesPerSecond = 1 << 20
        return settings
    }

    /// A replica named `owner` (advertised at `http://<owner>.invalid`) on `database`, files under `shared`.
    static func replica(_ owner: String, database: String, shared: URL, ttl: Double = ClusterLeaseLiveTests.ttl,
                        configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = EngineConfiguration(root: shared)
        c.allowPrivateNetworks = true
        c.checkpointInterval = 0.1
        c.checkpointBytes = 64 << 10
        c.retryBaseDelay = 0.2
        c.clusterDatabase = try ClusterDatabase.connect(url: database, poolSize: 4, within: 5)
        c.clusterReplica = ClusterReplica(owner: owner, advertiseURL: "http://\(owner).invalid", leaseTTL: ttl)
        configure(&c)
        return try DownloadEngine(configuration: c)
    }

    static func sharedDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ds-lease-\(UUID().uuidString)")
    }

    /// Waits (at most `timeout` seconds, polling every 20 ms) until `condition` holds.
    static func wait(_ timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    static func shutdown(_ engines: [DownloadEngine]) {
        let done = DispatchSemaphore(value: 0)
        Task {
            for engine in engines { await engine.shutdown() }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 20)
    }

    /// The state in download `id`'s row.
    static func state(of id: String, _ database: String) throws -> String? {
        try PostgresConnection(url: database, timeout: 5).execute("SELECT state FROM downloads WHERE id = $1", [id]).scalar
    }

    /// The lease row of the only download's lease in `database` (not the janitor's): its epoch,
    /// partial and durable offset.
    static func leaseRow(_ database: String) throws -> (epoch: Int64, partFile: String?, durable: Int64)? {
        let row = try PostgresConnection(url: database, timeout: 5)
            .execute("SELECT epoch, part_file, durable_offset FROM leases WHERE key <> $1 ORDER BY epoch DESC LIMIT 1",
                     [ClusterJanitor.leaseKey]).rows.first
        guard let row, let epoch = row[0].flatMap({ Int64($0) }) else { return nil }
        return (epoch, row[1], row[2].flatMap { Int64($0) } ?? 0)
    }

    /// `read()` once two reads 300 ms apart agree (at most 3 s): what was in flight when a holder
    /// stopped has landed. A write begun before the deadline may land late on a loaded machine; one
    /// that keeps landing never settles, and the checks after this see it.
    static func settled<T: Equatable>(_ read: () throws -> T) rethrows -> T {
        var last = try read()
        for _ in 0..<10 {
            usleep(300_000)
            let now = try read()
            if now == last { return now }
            last = now
        }
        return last
    }

    /// Active download leases in the table (the janitor's own is left out). A replica's count of
    /// leases held drops before its release reaches the row: another replica acting at once still
    /// finds the lease held (`held_elsewhere`).
    static func activeLeases(_ database: String) throws -> Int? {
        try PostgresConnection(url: database, timeout: 5)
            .execute("SELECT count(*) FROM leases WHERE active AND key <> $1", [ClusterJanitor.leaseKey]).scalar.flatMap { Int($0) }
    }

    /// `engine` holds no lease any more, and the release reached the lease row.
    static func letGo(_ engine: DownloadEngine, _ database: String) throws -> Bool {
        try engine.statistics.cluster?.leasesHeld == 0 && activeLeases(database) == 0
    }

    @Test func concurrentRequestsOnThreeReplicasMakeOneUpstreamGET() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let origin = try TestOrigin(bodySize: 1 << 20, settings: Self.throttled)
            defer { origin.stop() }
            let shared = Self.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            // Leases of 3 s: a 1 s lease is lost by a renewal that waits 0.7 s on a loaded machine,
            // and then another replica rightly takes the download over (a second holder).
            let engines = try ["a", "b", "c"].map { try Self.replica($0, database: database, shared: shared, ttl: 3) }
            defer { Self.shutdown(engines) }
            let answers = Mutex<[(Int, Result<Enqueued, EngineError>)]>([])
            DispatchQueue.concurrentPerform(iterations: 12) { n in
                let engine = n % 3
                do throws(EngineError) {
                    let enqueued = try engines[engine].request(DownloadRequest(url: origin.url))
                    answers.withLock { $0.append((engine, .success(enqueued))) }
                } catch {
                    answers.withLock { $0.append((engine, .failure(error))) }
                }
            }
            let all = answers.withLock { $0 }
            let holders = Set(all.compactMap { answer -> Int? in if case .success = answer.1 { answer.0 } else { nil } })
            c.expect(holders.count == 1, "one replica holds the download: \(holders)")
            guard holders.count == 1, let holder = holders.first else { return }
            for (engine, result) in all {
                if case .failure(let error) = result {
                    c.expect(error.code == .heldElsewhere && error.ownerURL == "http://\(["a", "b", "c"][holder]).invalid",
                             "replica \(engine) names the holder: \(error)")
                }
            }
            let id = try c.require(all.compactMap { try? $0.1.get().snapshot.id }.first)
            c.expect(engines[holder].placement(ofID: id) == .here)
            try c.expect(try Self.wait(20) { try Self.state(of: id, database) == "completed" }, "the download completes")
            // Completed: the holder wrote the final row, evicted the download and released its lease.
            try c.expect(try Self.wait(5) { try Self.letGo(engines[holder], database) }, "the lease is released, also in its row")
            c.expect(origin.getCount() == 1, "exactly one upstream GET: \(origin.getCount())")
            // Any replica now answers the URL from the stored file (adopting the row), without fetching again.
            let other = (holder + 1) % 3
            let again = try engines[other].request(DownloadRequest(url: origin.url))
            c.expect(again.snapshot.id == id && again.snapshot.state == .completed, "\(again.snapshot.state)")
            let file = try c.require(engines[other].completedFile(id: id))
            try c.expect(Array(try Data(contentsOf: URL(fileURLWithPath: file.path))) == origin.expectedBody())
            c.expect(origin.getCount() == 1)
            c.expect(Self.wait(5) { engines[other].statistics.cluster?.leasesHeld == 0 }, "released again once answered")
        }
    }

    @Test func aFrozenHoldersDownloadIsTakenOverFromTheDurableOffset() async throws {
        // Leases of 3 s: with 1 s, renewals that slipped on a loaded machine let b take the lease
        // over before the freeze, and the offset read "when frozen" was b's own, read after it resumed.
        let ttl = 3.0
        try await Self.withReplicas(ttl: ttl) { c, database, origin, a, b in
            let enqueued = try a.request(DownloadRequest(url: origin.url))
            let id = enqueued.snapshot.id
            try c.expect(try Self.wait(10) { (try Self.leaseRow(database)?.durable ?? 0) >= 256 << 10 }, "a checkpoint reached the lease row")
            c.expect(b.placement(ofID: id) == .elsewhere(ownerURL: "http://a.invalid"))
            c.expect(b.placement(ofToken: enqueued.token) == .elsewhere(ownerURL: "http://a.invalid"))
            c.expect(a.placement(ofID: id) == .here)
            let frozenAt = Date()
            a.core.clusterAbandonForTests()
            let frozen = try c.require(Self.leaseRow(database))
            c.expect(frozen.epoch == 1 && origin.getCount() == 1, "a still held the lease when frozen: \(frozen)")
            let durable = frozen.durable
            let bound = ttl + ttl / 3 + 1
            c.expect(Self.wait(bound + 2) { origin.getCount() >= 2 }, "another replica resumes")
            let took = Date().timeIntervalSince(frozenAt)
            c.expect(took <= bound, "the ranged GET came \(took) s after the freeze (bound \(bound) s)")
            let resumed = try c.require(origin.requests(path: "/file").filter { $0.method == "GET" }.last)
            let range = resumed.header("Range") ?? "none"
            let from = Int64(range.dropFirst("bytes=".count).dropLast()) ?? 0
            c.expect(range.hasPrefix("bytes=") && range.hasSuffix("-") && from >= durable && from > 0 && from < 3 << 20,
                     "resumes from the durable offset (\(durable) when frozen): \(range)")
            c.expect(resumed.header("If-Range") != nil)
            try c.expect(try Self.wait(20) { try Self.state(of: id, database) == "completed" }, "the download completes on b")
            c.expect(b.statistics.cluster?.takeovers == 1)
            let path = try c.require(PostgresConnection(url: database, timeout: 5).execute("SELECT final_path FROM downloads WHERE id = $1", [id]).scalar)
            c.expect(path.contains(".2-"), "the completed file has the second epoch's name: \(path)")
            try c.expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == origin.expectedBody(), "byte-identical")
            c.expect(origin.requests(path: "/file").filter { $0.method == "GET" && $0.header("Range") == nil }.count == 1,
                     "one full GET, the rest ranged")
        }
    }

    @Test func aStoppingHoldersHandOverIsTakenAtOnceNotAtTheNextSearch() async throws {
        // Leases of 120 s: the timed search for lapsed leases runs every 40 s; the hand-over's
        // NOTIFY starts it at once on the other replica.
        try await Self.withReplicas(ttl: 120) { c, _, origin, a, b in
            usleep(500_000)  // b's first search, at its start, is behind it.
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            c.expect(Self.wait(10) { (a.snapshot(id: id)?.bytesWritten ?? 0) > 64 << 10 }, "a runs the transfer")
            Self.shutdown([a])
            let stopped = Date()
            // Well below b's next search (40 s), with room for a loaded machine and database.
            c.expect(Self.wait(10) { b.statistics.cluster?.leasesHeld == 1 }, "b took it over")
            c.expect(Date().timeIntervalSince(stopped) < 10, "at once, not at b's next search (40 s)")
            c.expect(Self.wait(20) { b.snapshot(id: id)?.state == .completed }, "and completes it")
        }
    }

    @Test func aHolderPastItsDeadlineWritesNothingMore() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let origin = try TestOrigin(bodySize: 4 << 20, settings: Self.throttled)
            defer { origin.stop() }
            let shared = Self.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let a = try Self.replica("a", database: database, shared: shared)
            defer { Self.shutdown([a]) }
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            c.expect(Self.wait(10) { (a.snapshot(id: id)?.bytesWritten ?? 0) > 64 << 10 }, "the transfer runs")
            let cluster = try c.require(a.core.cluster)
            cluster.keeper.paused.store(true, ordering: .releasing)
            c.expect(Self.wait(Self.ttl + 2) { (a.statistics.cluster?.fencedWrites ?? 0) > 0 }, "the passed deadline stops the lease")
            c.expect(Self.wait(2) { a.statistics.cluster?.leasesHeld == 0 && a.core.locked { a.core.byID[id] } == nil }, "evicted, not written")
            let partial = a.core.store.partialDirectory + "/" + EpochFiles.partial(id: id, epoch: 1)
            // A commit begun before the deadline may still land: the rule is that nothing starts after it.
            let size = Self.settled { FileStore.fileSize(partial) }
            let row = try Self.settled { try Self.leaseRow(database).map { [$0.epoch, $0.durable] } }
            usleep(1_000_000)
            c.expect(FileStore.fileSize(partial) == size, "the partial does not grow")
            try c.expect(try Self.leaseRow(database)?.durable == row?[1], "the lease row does not change")
            c.expect(size ?? 0 < 4 << 20)
        }
    }

    @Test func actionsOnADownloadNobodyHoldsAdoptItAnywhere() async throws {
        try await Self.withReplicas { c, database, origin, a, b in
            let first = try a.request(DownloadRequest(url: origin.url))
            let id = first.snapshot.id
            try c.expect(try Self.wait(10) { (try Self.leaseRow(database)?.durable ?? 0) >= 128 << 10 }, "a checkpoint reached the lease row")
            do throws(EngineError) {
                _ = try b.cancelling(token: first.token)
                c.expect(false, "b cancelled a download a holds")
            } catch {
                c.expect(error.code == .heldElsewhere && error.ownerURL == "http://a.invalid", "\(error)")
            }
            c.expect(b.cancel(token: first.token) == nil, "the plain cancel answers as for an unknown token")
            // The last caller leaves on a: paused, final row written, released, evicted.
            c.expect(a.cancel(token: first.token)?.state == .paused)
            try c.expect(try Self.wait(5) { try Self.letGo(a, database) },
                         "a lets the paused download go")
            try c.expect(try Self.state(of: id, database) == "paused")
            // A request on b adopts it and resumes from what a made durable.
            let second = try b.request(DownloadRequest(url: origin.url))
            c.expect(second.snapshot.id == id)
            c.expect(Self.wait(5) { origin.getCount() >= 2 }, "b resumes")
            let range = origin.requests(path: "/file").filter { $0.method == "GET" }.last?.header("Range") ?? "none"
            c.expect(range.hasPrefix("bytes=") && range != "bytes=0-", "ranged: \(range)")
            // The operator pauses it on b, then resumes it on a (which adopts it; b's caller keeps it running).
            guard case .done = try b.operatorPausing(id: id) else { return c.expect(false, "b pauses") }
            try c.expect(try Self.wait(5) { try Self.letGo(b, database) },
                         "b lets the held download go")
            guard case .done = try a.operatorResuming(id: id) else { return c.expect(false, "a resumes") }
            try c.expect(try Self.wait(20) { try Self.state(of: id, database) == "completed" }, "completes on a")
            let path = try c.require(PostgresConnection(url: database, timeout: 5).execute("SELECT final_path FROM downloads WHERE id = $1", [id]).scalar)
            try c.expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == origin.expectedBody(), "byte-identical")
            c.expect(origin.requests(path: "/file").filter { $0.method == "GET" && $0.header("Range") == nil }.count == 1,
                     "one full GET, the rest ranged")
        }
    }
}
