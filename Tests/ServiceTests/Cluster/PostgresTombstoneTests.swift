import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Tombstones in PostgreSQL: a removal is written (the row deleted, the tombstone added) only while
/// the remover's epoch holds the download's lease, and no write ever brings a tombstoned id back.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct PostgresTombstoneTests {
    @Test func aRemovalIsFencedByTheRemoversLeaseAndATombstonedIDIsNeverWrittenAgain() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            let leases = LeaseStore(pool: store.pool)
            try c.expect(leases.acquire(key: "k", owner: "A", ownerURL: "http://a", ttl: 0.3)?.epoch == 1)
            var row = StateFixture.download("x", .paused)
            row.tokens = [TokenHash(token: "t1")]
            row.fence = LeaseFence(key: "k", epoch: 1, partFile: "x.1.part")
            try store.commit(StateBatch(upserts: [row]))
            var removal = TombstoneContractTests.tombstone("x", at: 1)
            removal.fence = row.fence

            // Epoch 1 lapses, epoch 2 takes the download: epoch 1's removal is refused whole.
            usleep(400_000)
            try c.expect(leases.acquire(key: "k", owner: "B", ownerURL: "http://b", ttl: 5)?.epoch == 2)
            try store.commit(StateBatch(deletions: ["x"], tombstones: [removal]))
            try c.expect(store.load(id: "x")?.tokens == [TokenHash(token: "t1")], "the row stays, with its tokens")
            try c.expect(store.loadTombstones().isEmpty)
            c.expect(store.fencedRows.load(ordering: .relaxed) == 1)

            // Epoch 2 removes it.
            removal.fence = LeaseFence(key: "k", epoch: 2, partFile: "x.2.part")
            removal.by = .retention
            try store.commit(StateBatch(deletions: ["x"], tombstones: [removal]))
            try c.expect(store.load(id: "x") == nil)
            try c.expect(store.downloadID(ofToken: TokenHash(token: "t1")) == nil, "its tokens went with it")
            try c.expect(store.loadTombstones().map(\.by) == [.retention])
            try c.expect(store.removers(of: ["x", "y"]) == ["x": .retention])

            // Any later write of the id, fenced or not, is dropped; the rest of its batch is written.
            var late = row
            late.fence = LeaseFence(key: "k", epoch: 2, partFile: "x.2.part")
            try store.commit(StateBatch(upserts: [late, StateFixture.download("y", .queued)]))
            var unfenced = row
            unfenced.fence = nil
            try store.commit(StateBatch(upserts: [unfenced]))
            try c.expect(store.load().map(\.id) == ["y"], "x never comes back")
        }
    }
}
