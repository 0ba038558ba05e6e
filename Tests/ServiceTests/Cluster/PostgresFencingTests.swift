import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Rows written under a lease (`StoredDownload.fence`): applied, with the lease's checkpoint, only
/// while the writer's epoch holds the lease; refused (and counted) once another epoch took it.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct PostgresFencingTests {
    @Test func aRowIsWrittenOnlyWhileItsEpochHoldsTheLease() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            let leases = LeaseStore(pool: store.pool)
            try c.expect(leases.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 5)?.epoch == 1)
            var row = StateFixture.download("x", .downloading)
            row.verifiedOffset = 4096
            row.tokens = [TokenHash(token: "t1")]
            row.fence = LeaseFence(key: "k", epoch: 1, partFile: "x.1.part")
            try store.commit(StateBatch(upserts: [row]))
            try c.expect(store.load(leaseKey: "k")?.state == .downloading)
            try c.expect(store.load(leaseKey: "k")?.tokens == [TokenHash(token: "t1")])
            try c.expect(store.leaseKey(ofID: "x") == "k")
            try c.expect(store.downloadID(ofToken: TokenHash(token: "t1")) == "x")
            try c.expect(store.downloadID(ofToken: TokenHash(token: "nope")) == nil)
            // Epoch 1 lapses and epoch 2 takes over, resuming from what epoch 1 recorded.
            try c.expect(leases.renew(key: "k", epoch: 1, ttl: 0.2))
            usleep(300_000)
            let grant = try c.require(leases.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5))
            c.expect(grant == LeaseStore.Grant(epoch: 2, partFile: "x.1.part", durableOffset: 4096))
            // Epoch 1 wakes up: its row is refused, the rest of its batch is written.
            var stale = row
            stale.state = .failed
            stale.verifiedOffset = 99_999
            let other = StateFixture.download("y", .paused)
            try store.commit(StateBatch(upserts: [stale, other]))
            try c.expect(store.load(id: "x")?.state == .downloading, "the fenced row is unchanged")
            try c.expect(store.load(id: "y")?.state == .paused)
            c.expect(store.fencedRows.load(ordering: .relaxed) == 1)
            try c.expect(leases.acquire(key: "k", owner: "C", ownerURL: "http://c", ttl: 5) == nil)
            // Epoch 2 writes.
            var current = row
            current.state = .completed
            current.verifiedOffset = 8192
            current.fence = LeaseFence(key: "k", epoch: 2, partFile: "x.2.part")
            try store.commit(StateBatch(upserts: [current]))
            try c.expect(store.load(id: "x")?.state == .completed)
            try c.expect(leases.release(key: "k", epoch: 2))
            let next = try c.require(leases.acquire(key: "k", owner: "C", ownerURL: "http://c", ttl: 5))
            c.expect(next == LeaseStore.Grant(epoch: 3, partFile: "x.2.part", durableOffset: 8192), "the checkpoint went with the row")
            // A replica shutting down hands its lease over: lapsed at once, for the next search to take.
            try c.expect(leases.handOver([("k", 3)]) == ["k"])
            try c.expect(leases.lapsed(limit: 10).map(\.key) == ["k"])
            try c.expect(leases.handOver([("k", 2)]).isEmpty, "an older epoch hands nothing over")
            // Several at once, in one statement: the fenced one is left out.
            let second = try c.require(leases.acquire(key: "k2,\"quoted\"", owner: "C", ownerURL: "http://c", ttl: 5))
            let third = try c.require(leases.acquire(key: "k3", owner: "C", ownerURL: "http://c", ttl: 5))
            try c.expect(leases.handOver([("k2,\"quoted\"", second.epoch), ("k3", third.epoch), ("k3", third.epoch - 1)]) == ["k2,\"quoted\"", "k3"])
            try c.expect(Set(leases.lapsed(limit: 10).map(\.key)) == ["k", "k2,\"quoted\"", "k3"])
        }
    }

    /// A deletion decided under epoch 1 (a forgotten download) that commits late, after epoch 2
    /// took the download over and gave it a caller, deletes nothing: the row is epoch 2's now.
    @Test func aDeletionIsWrittenOnlyWhileItsEpochHoldsTheLease() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            let leases = LeaseStore(pool: store.pool)
            try c.expect(leases.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 0.2)?.epoch == 1)
            var row = StateFixture.download("x", .paused)
            row.fence = LeaseFence(key: "k", epoch: 1, partFile: "x.1.part")
            try store.commit(StateBatch(upserts: [row]))
            usleep(300_000)
            try c.expect(leases.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5)?.epoch == 2)
            row.tokens = [TokenHash(token: "t2")]
            row.fence = LeaseFence(key: "k", epoch: 2, partFile: "x.2.part")
            try store.commit(StateBatch(upserts: [row]))
            let late = StateBatch(deletions: ["x"], deletionFences: ["x": LeaseFence(key: "k", epoch: 1, partFile: "x.1.part")])
            try store.commit(late)
            try c.expect(store.load(id: "x") != nil, "the row stays")
            try c.expect(store.downloadID(ofToken: TokenHash(token: "t2")) == "x", "with epoch 2's caller")
            c.expect(store.fencedRows.load(ordering: .relaxed) == 1)
            // Under the epoch that holds the lease, the deletion goes through.
            try store.commit(StateBatch(deletions: ["x"], deletionFences: ["x": LeaseFence(key: "k", epoch: 2, partFile: "x.2.part")]))
            try c.expect(store.load(id: "x") == nil)
        }
    }

    @Test func leaseNamesKeepCredentialedKeysApart() {
        let plain = CoalescingKey(url: "http://o.test/f", ignoring: [], credential: nil)
        let keyed = CoalescingKey(url: "http://o.test/f", ignoring: [], credential: [0xab, 0x01])
        #expect(plain.leaseName == "http://o.test/f")
        #expect(keyed.leaseName == "http://o.test/f ab01")
        #expect(CoalescingKey(url: "http://o.test/f?sig=1", ignoring: ["sig"], credential: nil).leaseName == "http://o.test/f")
    }
}
