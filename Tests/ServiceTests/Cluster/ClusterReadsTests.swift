import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// Reads anywhere, on a real PostgreSQL: rows written by another replica's store (and heartbeats
/// by the holder of their lease) are read through an engine in cluster mode that does not hold them:
/// snapshots, the list, completed files in the shared areas, caller tokens, relayed subscriptions.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterReadsTests {
    /// A replica's engine in cluster mode on `url` (started before any row is written: it holds none).
    static func replica(_ url: String) throws -> DownloadEngine {
        let database = try ClusterDatabase.connect(url: url, poolSize: 4, within: 10)
        var c = EngineFixture.configuration(EngineFixture.root())
        c.clusterDatabase = database
        return try DownloadEngine(configuration: c, driver: FakeTransferDriver(), scheduler: SystemScheduler(), diskPressure: .disabled)
    }

    static func row(_ id: String, _ state: DownloadState, created: Double, offset: Int64 = 0, tokens: [String] = []) -> StoredDownload {
        var d = StoredDownload(id: id, url: "http://o.test/\(id)", storage: .cache, state: state,
                               validator: Validator(etag: "\"e-\(id)\"", lastModified: nil), expectedTotal: 1000, verifiedOffset: offset,
                               expectedSHA256: nil, expectedSize: nil, fileName: "\(id).bin", finalPath: nil, sha256: nil, size: nil,
                               createdAt: Date(timeIntervalSince1970: created), updatedAt: Date(timeIntervalSince1970: created + 1),
                               lastAccess: Date(timeIntervalSince1970: created + 1), error: nil)
        d.tokens = Set(tokens.map { TokenHash(token: $0) })
        return d
    }

    /// `download` completed, its 5-byte file at `path` (written there).
    static func completed(_ download: StoredDownload, at path: String) throws -> StoredDownload {
        var d = download
        try Data("hello".utf8).write(to: URL(fileURLWithPath: path))
        (d.state, d.finalPath, d.size, d.verifiedOffset, d.validator) = (.completed, path, 5, 0, nil)
        d.sha256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        return d
    }

    /// Row `id` is fenced by lease `key` (what a holder's fenced write records; a heartbeat counts only for its lease's row).
    static func setLeaseKey(_ key: String, of id: String, _ pool: PostgresPool) throws {
        _ = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("UPDATE downloads SET lease_key = $2 WHERE id = $1", [id, key])
        }
    }

    /// Every database round trip (the first use of the shared server included: `initdb`) runs on a
    /// thread of its own (`onThread`, `blocking`), never on the small cooperative pool.
    @Test func snapshotsListFilesAndTokensOfDownloadsHeldNowhereComeFromTheDatabase() async throws {
        let url = try await onThread { try PostgresServer.shared.createDatabase() }
        let engine = try await onThread { try Self.replica(url) }
        try await blocking { c in try Self.readThrough(engine, url: url, c) }
        await engine.shutdown()
    }

    static func readThrough(_ engine: DownloadEngine, url: String, _ c: BlockingChecks) throws {
        let cache = engine.configuration.cacheDirectory.path
        let outside = EngineFixture.root().path + "/c2-outside.bin"
        let rows = try { () throws -> [StoredDownload] in
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            var k1 = Self.row("k1", .paused, created: 400, offset: 10)
            k1.credentialKey = [UInt8](repeating: 9, count: 32)
            let rows = [Self.row("p1", .paused, created: 100, offset: 500, tokens: ["tok-a", "tok-b"]),
                        try Self.completed(Self.row("c1", .paused, created: 200), at: cache + "/c1-c1.bin"),
                        try Self.completed(Self.row("c2", .paused, created: 300), at: outside), k1]
            try store.commit(StateBatch(upserts: rows))
            return rows
        }()

        let p1 = try c.require(engine.snapshot(id: "p1"))
        c.expect(p1 == ClusterRow(stored: rows[0]).snapshot(ignoring: []))
        c.expect(p1.state == .paused && p1.bytesWritten == 500 && p1.callers == 2 && p1.resumable && p1.pausedBy == .callers)
        c.expect(engine.snapshot(id: "c1")?.path == cache + "/c1-c1.bin")
        c.expect(engine.snapshot(id: "nope") == nil)
        c.expect(engine.core.locked { engine.core.byID.isEmpty }, "nothing was loaded into the engine")

        c.expect(engine.list().map(\.id) == ["k1", "c2", "c1", "p1"], "newest first")
        let local = try engine.request(DownloadRequest(url: "http://o.test/local"))
        let listed = engine.list()
        c.expect(listed.map(\.id) == [local.snapshot.id, "k1", "c2", "c1", "p1"], "the engine's own downloads with them, once")
        c.expect(engine.list(state: .completed).map(\.id) == ["c2", "c1"], "the database filters by state")
        c.expect(engine.list(state: .paused).map(\.id).filter { $0 != local.snapshot.id } == ["k1", "p1"])
        // A page of the list: the database reads only the rows after its position, at most `limit` of them.
        c.expect(engine.list(state: .completed, after: ListPosition(micros: 300_000_000, id: "c2"), limit: 5).map(\.id) == ["c1"])
        c.expect(engine.list(state: .completed, after: ListPosition(micros: 300_000_000, id: "c3"), limit: 5).map(\.id) == ["c2", "c1"],
                 "as old, a greater id comes first")
        c.expect(engine.list(state: .paused, after: nil, limit: 1).map(\.id).filter { $0 != local.snapshot.id } == ["k1"])
        c.expect(engine.list(state: nil, after: ListPosition(micros: 150_000_000, id: "x"), limit: 5).map(\.id)
                 .filter { $0 != local.snapshot.id } == ["p1"])
        // `/metrics`' counts: every row, the engine's own download once (whether or not its row is written yet).
        let counts = engine.stateCounts().states
        c.expect(counts.values.reduce(0, +) == 5 && counts[.paused, default: 0] >= 2 && counts[.completed, default: 0] >= 2, "\(counts)")

        c.expect(engine.completedFile(id: "c1") == CompletedFile(path: cache + "/c1-c1.bin", fileName: "c1.bin", size: 5,
                                                                sha256: rows[1].sha256!))
        c.expect(engine.completedFile(id: "c2") == nil, "a file outside the shared areas is never served")
        c.expect(engine.completedFile(id: "p1") == nil)
        try FileManager.default.removeItem(atPath: cache + "/c1-c1.bin")
        c.expect(engine.completedFile(id: "c1") == nil, "gone from disk")

        c.expect(engine.isCaller(token: "tok-a", of: "p1") && engine.isCaller(token: "tok-b", of: "p1"))
        c.expect(!engine.isCaller(token: "tok-a", of: "c1") && !engine.isCaller(token: "tok-x", of: "p1"))
        c.expect(engine.isCaller(token: local.token, of: local.snapshot.id), "the engine's own tokens as before")
        c.expect(engine.liveTokens(among: ["tok-a", "tok-x", local.token, "tok-b"]) == ["tok-a", local.token, "tok-b"])
        try c.expect(engine.isPrivate(id: "k1") && !engine.isPrivate(id: "p1") && !engine.isPrivate(id: "nope"))
        c.expect(engine.snapshot(id: "k1")?.isPrivate == true)
        // A read that fails is no answer: never "public".
        let admin = try PostgresConnection(url: url, timeout: 5)
        try admin.execute("ALTER TABLE downloads RENAME TO downloads_away")
        do throws(EngineError) {
            let answer = try engine.isPrivate(id: "k1")
            c.expect(false, "answered \(answer) without its row")
        } catch {
            c.expect(error.code == .databaseUnavailable, "\(error)")
        }
        try admin.execute("ALTER TABLE downloads_away RENAME TO downloads")
        try c.expect(engine.isPrivate(id: "k1"))
    }

    @Test func aHeartbeatCountsOnlyWhileItsEpochHoldsTheLeaseAndAStaleEpochChangesNothing() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let pool = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2)).pool
            let (store, leases, beats, reader) = (try PostgresStateStore(pool: pool), LeaseStore(pool: pool), HeartbeatStore(pool: pool),
                                                  ClusterReader(pool: pool))
            try store.commit(StateBatch(upserts: [Self.row("d1", .downloading, created: 1, offset: 100, tokens: ["t1"])]))
            try Self.setLeaseKey("key-d1", of: "d1", pool)
            func beat(epoch: Int64, bytes: Int64, reason: String? = nil) -> Heartbeat {
                Heartbeat(id: "d1", leaseKey: "key-d1", epoch: epoch, bytesWritten: bytes, callers: 3, bytesPerSecond: 50, etaSeconds: 6,
                          reason: reason)
            }
            func shown() throws -> DownloadSnapshot? { try reader.download(id: "d1")?.snapshot(ignoring: []) }
            func stored() throws -> [String?] {
                try pool.withConnection { db throws(StateStoreError) in
                    try db.execute("SELECT hb_bytes_written, hb_epoch FROM downloads WHERE id = 'd1'")
                }.rows.first ?? []
            }
            try c.expect(beats.write([beat(epoch: 1, bytes: 700)]).isEmpty, "no lease: fenced")
            try c.expect(leases.acquire(key: "key-d1", owner: "A", ownerURL: "http://a", ttl: 0.5)?.epoch == 1)
            try c.expect(beats.write([beat(epoch: 1, bytes: 700)]) == ["d1"])
            try c.expect(leases.acquire(key: "key-x", owner: "A", ownerURL: "http://a", ttl: 30)?.epoch == 1)
            try c.expect(beats.write([Heartbeat(id: "d1", leaseKey: "key-x", epoch: 1, bytesWritten: 5, callers: 1)]).isEmpty,
                         "another lease's heartbeat does not reach the row")
            let live = try c.require(try shown())
            c.expect(live.bytesWritten == 700 && live.callers == 3 && live.bytesPerSecond == 50 && live.etaSeconds == 6
                     && live.fraction == 0.7, "\(live)")

            usleep(700_000)  // A's lease expires; B takes the key.
            try c.expect(leases.acquire(key: "key-d1", owner: "B", ownerURL: "http://b", ttl: 30)?.epoch == 2)
            try c.expect(beats.write([beat(epoch: 1, bytes: 900)]).isEmpty, "epoch 1 is fenced")
            try c.expect(stored() == ["700", "1"], "the stale epoch changed nothing")
            let unheld = try c.require(try shown())
            c.expect(unheld.bytesWritten == 100 && unheld.callers == 1 && unheld.bytesPerSecond == 0, "epoch 1's beat no longer counts: \(unheld)")

            c.expect(live.reason == nil)
            try c.expect(beats.write([beat(epoch: 2, bytes: 800, reason: "disk_full"),
                                      Heartbeat(id: "gone", leaseKey: "key-d1", epoch: 2, bytesWritten: 1, callers: 1)]) == ["d1"])
            try c.expect(shown()?.bytesWritten == 800)
            try c.expect(shown()?.reason == "disk_full", "the holder's reason is shown")
            try c.expect(leases.release(key: "key-d1", epoch: 2))
            try c.expect(shown()?.bytesWritten == 100, "a released lease's beat no longer counts")
            try c.expect(beats.write([beat(epoch: 2, bytes: 999)]).isEmpty, "released: fenced")
        }
    }

    /// Waits (at most `seconds`) for the first event `match` accepts; the events before it are dropped.
    static func next(_ subscription: DownloadSubscription, within seconds: Double,
                     _ match: @escaping @Sendable (DownloadEvent) -> Bool) async throws -> DownloadEvent? {
        try await withTimeout(seconds) {
            for await event in subscription where match(event) { return event }
            return nil
        }
    }

    /// `next` without a task: the subscription polled from the calling thread, waiting (at most
    /// `seconds` in all) on its waker.
    static func take(_ subscription: DownloadSubscription, within seconds: Double,
                     _ match: (DownloadEvent) -> Bool) -> DownloadEvent? {
        let deadline = DispatchTime.now() + seconds
        while true {
            let ready = DispatchSemaphore(value: 0)
            switch subscription.poll(waker: { ready.signal() }) {
            case .event(let event): if match(event) { return event }
            case .end: return nil
            case .wait: guard ready.wait(timeout: deadline) == .success else { return nil }
            }
        }
    }

    @Test func aRelayedSubscriptionFollowsTheHoldersHeartbeatWithinASecondAndEndsOnCompleted() async throws {
        let url = try await onThread { try PostgresServer.shared.createDatabase() }
        let engine = try await onThread { try Self.replica(url) }
        defer { Task { await engine.shutdown() } }
        let pool = PostgresPool(url: url, capacity: 2)
        let store = try await onThread { try PostgresStateStore(pool: pool) }
        let download = Self.row("d2", .downloading, created: 5, offset: 0, tokens: ["t"])
        try await onThread {
            try store.commit(StateBatch(upserts: [download]))
            try Self.setLeaseKey("key-d2", of: "d2", pool)
            _ = try LeaseStore(pool: pool).acquire(key: "key-d2", owner: "A", ownerURL: "http://a", ttl: 30)
        }
        let subscription = try #require(try await onThread { engine.subscribe(id: "d2") })
        #expect(engine.statistics.subscribers == 1)
        let first = try await Self.next(subscription, within: 20) { _ in true }
        #expect(first == .progress(ClusterRow(stored: download).snapshot(ignoring: [])))

        // Measured on a thread of its own, the subscription polled (`poll(waker:)`): what is timed is
        // the relay (its poll every 0.25 s and a query), not how soon a loaded cooperative pool runs a task.
        try await blocking { c in
            for bytes: Int64 in [300, 600] {
                _ = try HeartbeatStore(pool: pool).write([Heartbeat(id: "d2", leaseKey: "key-d2", epoch: 1, bytesWritten: bytes, callers: 2)])
                let written = Date()
                let seen = Self.take(subscription, within: 20) { $0.snapshot.bytesWritten == bytes }
                let after = Date().timeIntervalSince(written)
                guard case .progress(let snapshot)? = seen else { return c.expect(false, "\(String(describing: seen))") }
                c.expect(snapshot.callers == 2 && snapshot.state == .downloading)
                // A poll every 0.25 s and a query on the shared, loaded database: well within 3 s
                // (the pacing itself is counted on a manual clock in SubscriptionRelayTests).
                c.expect(after < 3, "relayed \(after) s after the heartbeat")
            }
        }
        try await onThread {
            try store.commit(StateBatch(upserts: [try Self.completed(download, at: engine.configuration.cacheDirectory.path + "/d2-d2.bin")]))
        }
        let last = try await Self.next(subscription, within: 20) { $0.isTerminal }
        guard case .completed(let done)? = last else { Issue.record("\(String(describing: last))"); return }
        #expect(done.state == .completed && done.bytesWritten == 5 && done.sha256 != nil)
        #expect(try await Self.next(subscription, within: 20) { _ in true } == nil, "the stream ended")
        #expect(engine.statistics.subscribers == 0)
    }

    @Test func aRemovedRowEndsTheRelayWithRemovedAndAnEndedDownloadEndsAtOnce() async throws {
        let url = try await onThread { try PostgresServer.shared.createDatabase() }
        let engine = try await onThread { try Self.replica(url) }
        defer { Task { await engine.shutdown() } }
        let store = try await onThread { try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2)) }
        var failing = Self.row("f1", .failed, created: 6)
        failing.error = DownloadFailure(code: .httpError, message: "HTTP 404", httpStatus: 404)
        let failed = failing
        try await onThread { try store.commit(StateBatch(upserts: [failed])) }

        let ended = try #require(try await onThread { engine.subscribe(id: "f1") })
        #expect(try await Self.next(ended, within: 20) { _ in true } == .failed(ClusterRow(stored: failed).snapshot(ignoring: [])))
        #expect(try await Self.next(ended, within: 20) { _ in true } == nil)

        // The relayed `removed` says who removed the download, as its tombstone does (none: the service's own bounds).
        let removals: [(String, RemovalCause?)] = [("r1", .operator), ("r2", .retention), ("r3", nil)]
        for (id, by) in removals {
            let row = Self.row(id, .paused, created: 5, offset: 40)
            try await onThread { try store.commit(StateBatch(upserts: [row])) }
            let subscription = try #require(try await onThread { engine.subscribe(id: id) })
            #expect(try await Self.next(subscription, within: 20) { _ in true }?.snapshot.state == .paused)
            let tombstones = by.map { [Tombstone(id: id, url: row.url, removedAt: Date(), by: $0, paths: [])] } ?? []
            try await onThread { try store.commit(StateBatch(deletions: [id], tombstones: tombstones)) }
            let last = try await Self.next(subscription, within: 20) { _ in true }
            #expect(last == .removed(by: by ?? .retention, ClusterRow(stored: row).snapshot(ignoring: [])))
            #expect(try await Self.next(subscription, within: 20) { _ in true } == nil)
            #expect(try await onThread { engine.subscribe(id: id) } == nil)
        }
        try await withTimeout(5) {
            while engine.clusterReads?.relay.count != 0 { try await Task.sleep(nanoseconds: 20_000_000) }
        }
    }
}
