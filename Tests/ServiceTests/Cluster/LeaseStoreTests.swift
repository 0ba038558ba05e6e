import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// Leases on a real PostgreSQL: one holder per key, epochs that only grow, expiry on the database's
/// clock, and every write of a holder whose epoch is gone refused (fenced).
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct LeaseStoreTests {
    func leases() throws -> LeaseStore {
        let url = try PostgresServer.shared.createDatabase()
        return LeaseStore(pool: try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2)).pool)
    }

    /// Every lease a replica keeps is renewed in one statement: those its epoch still holds
    /// unexpired are renewed, the others (another epoch, released, expired) refused, keys with
    /// quotes and backslashes too.
    @Test func manyLeasesAreRenewedInOneStatement() async throws {
        try await blocking { c in
            let store = try leases()
            var held: [(key: String, epoch: Int64)] = []
            for n in 0..<300 {
                let key = "http://o.test/\"q\"\\\(n)"
                held.append((key, try c.require(store.acquire(key: key, owner: "A", ownerURL: "http://a", ttl: 60)).epoch))
            }
            let expiring = (key: "expiring", epoch: try c.require(store.acquire(key: "expiring", owner: "A", ownerURL: "http://a", ttl: 0.2)).epoch)
            usleep(400_000)
            try c.expect(store.release(key: held[1].key, epoch: held[1].epoch))
            var asked = held + [expiring]
            asked[2].epoch += 1  // an epoch that never held it
            let renewed = try store.renew(asked, ttl: 5)
            c.expect(renewed == Set(held.map(\.key)).subtracting([held[1].key, held[2].key]), "\(renewed.count) renewed")
            c.expect(!renewed.contains("expiring"), "an expired lease is not renewed")
            try c.expect(store.holder(key: held[0].key)?.owner == "A" && store.holder(key: held[299].key)?.owner == "A")
            try c.expect(store.renew([], ttl: 5).isEmpty)
        }
    }

    /// A batch renewal that cannot reach the database counts every lease of it as failed at once,
    /// instead of trying each again through the same connect deadline (which held the keeper's
    /// thread for minutes: no scans and no heartbeats meanwhile).
    @Test func renewalsThatCannotReachTheDatabaseAreNotTriedLeaseByLease() async throws {
        try await blocking { c in
            let listener = try RawListener(.neverAnswer)  // Accepts, and never answers the start-up.
            defer { listener.stop() }
            let pool = PostgresPool(url: "postgresql://u@127.0.0.1:\(listener.port)/db?sslmode=disable", capacity: 2,
                                    connectTimeout: 1, statementTimeout: 1)
            let store = LeaseStore(pool: pool)
            let clock = SystemClock()
            let holds = (0..<5).map { LeaseHold(key: "k\($0)", epoch: 1, acquiredAt: clock.monotonic(), ttl: 30) }
            let decided = store.renewals(of: holds, policy: LeasePolicy(ttl: 30), monotonic: { clock.monotonic() })
            c.expect(decided.map(\.hold.key) == holds.map(\.key).sorted())
            c.expect(listener.connectionCount == 1, "\(listener.connectionCount) connections for one failed statement")
            c.expect(!pool.reachable)
            c.expect(decided.allSatisfy { $0.decision != .renew }, "\(decided.map(\.decision))")
        }
    }

    @Test func oneHolderPerKeyAndATakeoverOnlyAfterExpiry() async throws {
        try await blocking { c in
            let store = try leases()
            let a = try c.require(store.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 1))
            c.expect(a == LeaseStore.Grant(epoch: 1, partFile: nil, durableOffset: 0))
            try c.expect(store.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 1) == nil, "held and unexpired")
            try c.expect(store.holder(key: "k")?.owner == "A")
            try c.expect(store.acquire(key: "other", owner: "B", ownerURL: "http://b", ttl: 1)?.epoch == 1, "keys are independent")
            try c.expect(store.checkpoint(key: "k", epoch: 1, partFile: "id.1.part", durableOffset: 8192))
            try c.expect(store.renew(key: "k", epoch: 1, ttl: 0.3))
            usleep(400_000)
            try c.expect(store.holder(key: "k") == nil)
            try c.expect(store.lapsed(limit: 10).map(\.key) == ["k"])
            let b = try c.require(store.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5))
            c.expect(b == LeaseStore.Grant(epoch: 2, partFile: "id.1.part", durableOffset: 8192), "resumes from what epoch 1 made durable")
            try c.expect(store.lapsed(limit: 10).isEmpty)
            // Epoch 1 wakes up: everything it tries is refused.
            try c.expect(!store.renew(key: "k", epoch: 1, ttl: 5))
            try c.expect(!store.checkpoint(key: "k", epoch: 1, partFile: "id.1.part", durableOffset: 99_999))
            try c.expect(!store.release(key: "k", epoch: 1))
            try c.expect(store.holder(key: "k")?.owner == "B")
            try c.expect(store.acquire(key: "k", owner: "C", ownerURL: "http://c", ttl: 1) == nil)
        }
    }

    /// Lease rows do not pile up (one per URL ever fetched): a row idle for an hour whose key no
    /// download names is deleted; one a download names, one held, the janitor's and a recent one
    /// stay; a key made again starts above every epoch deleted.
    @Test func idleRowsOfKeysNoDownloadNamesAreDeletedAndEpochsStillGrow() async throws {
        try await blocking { c in
            let store = try leases()
            func sql(_ text: String, _ parameters: [String?] = []) throws -> PostgresRows {
                try store.pool.withConnection { db throws(StateStoreError) in try db.execute(text, parameters) }
            }
            for key in ["gone", "named", "recent", "janitor"] {
                let grant = try c.require(store.acquire(key: key, owner: "A", ownerURL: "http://a", ttl: 5))
                try c.expect(store.release(key: key, epoch: grant.epoch))
            }
            for _ in 0..<3 {  // "gone" reaches epoch 4.
                let grant = try c.require(store.acquire(key: "gone", owner: "A", ownerURL: "http://a", ttl: 5))
                try c.expect(store.release(key: "gone", epoch: grant.epoch))
            }
            try c.expect(store.acquire(key: "held", owner: "A", ownerURL: "http://a", ttl: 5)?.epoch == 1)
            try PostgresStateStore(pool: store.pool).commit(StateBatch(upserts: [StateFixture.download("d1", .paused)]))
            _ = try sql("UPDATE downloads SET lease_key = 'named' WHERE id = 'd1'")
            _ = try sql("UPDATE leases SET expires_at = now() - interval '2 hours' WHERE key <> 'recent'")
            try c.expect(store.forgetIdle(limit: 100, keeping: "janitor") == 1)
            try c.expect(Set(sql("SELECT key FROM leases").rows.compactMap { $0[0] }) == ["named", "recent", "janitor", "held"])
            try c.expect(store.forgetIdle(limit: 100, keeping: "janitor") == 0, "nothing more to delete")
            let again = try c.require(store.acquire(key: "gone", owner: "B", ownerURL: "http://b", ttl: 5))
            c.expect(again.epoch == 5 && again.partFile == nil, "above the deleted epoch 4: \(again)")
            try c.expect(store.acquire(key: "fresh", owner: "B", ownerURL: "http://b", ttl: 5)?.epoch == 5, "new keys start above the floor")
        }
    }

    @Test func aReleasedKeyIsNotTakenOverAndItsNextEpochIsHigher() async throws {
        try await blocking { c in
            let store = try leases()
            try c.expect(store.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 5)?.epoch == 1)
            try c.expect(store.release(key: "k", epoch: 1))
            try c.expect(store.lapsed(limit: 10).isEmpty, "a finished transfer is nobody's to resume")
            try c.expect(!store.renew(key: "k", epoch: 1, ttl: 5))
            try c.expect(store.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5)?.epoch == 2)
        }
    }

    @Test func replicasRacingForOneKeyGetOneGrant() async throws {
        try await blocking { c in
            let store = try leases()
            let grants = Mutex<[Int64]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { n in
                if let grant = try? store.acquire(key: "race", owner: "R\(n)", ownerURL: "http://r\(n)", ttl: 5) {
                    grants.withLock { $0.append(grant.epoch) }
                }
            }
            c.expect(grants.withLock { $0 } == [1])
        }
    }
}
