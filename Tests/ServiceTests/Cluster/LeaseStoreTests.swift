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
