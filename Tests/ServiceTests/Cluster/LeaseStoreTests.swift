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

    @Test func oneHolderPerKeyAndATakeoverOnlyAfterExpiry() throws {
        let store = try leases()
        let a = try #require(try store.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 1))
        #expect(a == LeaseStore.Grant(epoch: 1, partFile: nil, durableOffset: 0))
        #expect(try store.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 1) == nil, "held and unexpired")
        #expect(try store.holder(key: "k")?.owner == "A")
        #expect(try store.acquire(key: "other", owner: "B", ownerURL: "http://b", ttl: 1)?.epoch == 1, "keys are independent")
        #expect(try store.checkpoint(key: "k", epoch: 1, partFile: "id.1.part", durableOffset: 8192))
        #expect(try store.renew(key: "k", epoch: 1, ttl: 0.3))
        usleep(400_000)
        #expect(try store.holder(key: "k") == nil)
        #expect(try store.lapsed(limit: 10).map(\.key) == ["k"])
        let b = try #require(try store.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5))
        #expect(b == LeaseStore.Grant(epoch: 2, partFile: "id.1.part", durableOffset: 8192), "resumes from what epoch 1 made durable")
        #expect(try store.lapsed(limit: 10).isEmpty)
        // Epoch 1 wakes up: everything it tries is refused.
        #expect(try !store.renew(key: "k", epoch: 1, ttl: 5))
        #expect(try !store.checkpoint(key: "k", epoch: 1, partFile: "id.1.part", durableOffset: 99_999))
        #expect(try !store.release(key: "k", epoch: 1))
        #expect(try store.holder(key: "k")?.owner == "B")
        #expect(try store.acquire(key: "k", owner: "C", ownerURL: "http://c", ttl: 1) == nil)
    }

    @Test func aReleasedKeyIsNotTakenOverAndItsNextEpochIsHigher() throws {
        let store = try leases()
        #expect(try store.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 5)?.epoch == 1)
        #expect(try store.release(key: "k", epoch: 1))
        #expect(try store.lapsed(limit: 10).isEmpty, "a finished transfer is nobody's to resume")
        #expect(try !store.renew(key: "k", epoch: 1, ttl: 5))
        #expect(try store.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5)?.epoch == 2)
    }

    @Test func replicasRacingForOneKeyGetOneGrant() throws {
        let store = try leases()
        let grants = Mutex<[Int64]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { n in
            if let grant = try? store.acquire(key: "race", owner: "R\(n)", ownerURL: "http://r\(n)", ttl: 5) {
                grants.withLock { $0.append(grant.epoch) }
            }
        }
        #expect(grants.withLock { $0 } == [1])
    }
}
