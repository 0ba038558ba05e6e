import Foundation
import Testing
@testable import DownloaderEngine

/// The cluster feed's stamps on a real PostgreSQL: a change that commits late is stamped after
/// those that committed before it, so a reader moving its cursor never skips it; a write that
/// changes nothing but `hb_at` keeps the stamp; a deleted row is told as removed, by its tombstone.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterFeedStoreTests {
    @Test func aLateCommitIsStampedAfterWhatCommittedBeforeItAndNeverSkipped() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            let feed = ClusterFeedStore(pool: store.pool)
            try store.commit(StateBatch(upserts: [StateFixture.download("x", .downloading), StateFixture.download("y", .downloading)]))
            try c.expect(feed.stamp() == 2)
            let start = try feed.start()
            c.expect(start.rows.map(\.stored.id).sorted() == ["x", "y"])
            var cursor = start.version

            // x changes in a transaction that stays open while y's change commits and is stamped.
            let slow = try PostgresConnection(url: url, timeout: 5)
            try slow.execute("BEGIN")
            try slow.execute("UPDATE downloads SET state = 'paused' WHERE id = 'x'")
            var y = StateFixture.download("y", .downloading)
            y.verifiedOffset = 10
            try store.commit(StateBatch(upserts: [y]))
            try c.expect(feed.stamp() == 1, "x is held by its writer: skipped")
            let first = try feed.changes(after: cursor)
            c.expect(first.changes.map(\.id) == ["y"] && !first.more)
            cursor = try c.require(first.changes.last?.version)

            try slow.execute("COMMIT")
            try c.expect(feed.stamp() == 1)
            let second = try feed.changes(after: cursor)
            c.expect(second.changes.map(\.id) == ["x"], "the late commit comes above the cursor")
            c.expect(second.changes.first?.row?.stored.state == .paused)
            cursor = try c.require(second.changes.last?.version)

            // Only hb_at changes: no new stamp. A deletion: a removal, with its tombstone's cause.
            try slow.execute("UPDATE downloads SET hb_at = now() WHERE id = 'x'")
            try c.expect(feed.stamp() == 0)
            var removal = TombstoneContractTests.tombstone("y", at: 5)
            removal.by = .operator
            try store.commit(StateBatch(deletions: ["y"], tombstones: [removal]))
            try c.expect(feed.stamp() == 1)
            let third = try feed.changes(after: cursor)
            c.expect(third.changes == [ClusterFeedStore.Change(version: cursor + 1, id: "y", row: nil, removedBy: .operator)],
                     "\(third.changes)")
        }
    }
}
