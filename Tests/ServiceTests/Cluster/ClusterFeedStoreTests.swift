import Foundation
import Testing
@testable import DownloaderEngine

/// The cluster feed's stamps on a real PostgreSQL: a change that commits late is stamped after
/// those that committed before it, so a reader moving its cursor never skips it; a lifecycle change
/// is logged (never overwritten) before its row's progress; a write that changes nothing but
/// `hb_at` keeps the stamp; a deleted row is logged as removed, by its tombstone.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterFeedStoreTests {
    static func told(_ changes: [ClusterFeedStore.Change]) -> [String] {
        changes.map { change in
            switch change.kind {
            case .row: "row \(change.id) \(change.row?.stored.state.rawValue ?? "-")"
            case .created(let state): "created \(change.id) \(state.rawValue)"
            case .changed(let from, _, let to, _): "changed \(change.id) \(from.rawValue)>\(to.rawValue)"
            case .removed(let by): "removed \(change.id) \(by?.rawValue ?? "-")"
            }
        }
    }

    @Test func aLateCommitIsStampedAfterWhatCommittedBeforeItAndNeverSkipped() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            let feed = ClusterFeedStore(pool: store.pool)
            try store.commit(StateBatch(upserts: [StateFixture.download("x", .downloading)]))
            try c.expect(feed.stamp() == 2)
            let start = try feed.start()
            c.expect(start.rows.map(\.stored.id) == ["x"] && start.version == 2)
            var cursor = start.version
            try store.commit(StateBatch(upserts: [StateFixture.download("y", .downloading)]))
            try c.expect(feed.stamp() == 2)
            let created = try feed.changes(after: cursor)
            c.expect(Self.told(created.changes) == ["created y downloading", "row y downloading"], "log entry first")
            cursor = try c.require(created.changes.last?.version)

            // x changes in a transaction that stays open while y's change commits and is stamped.
            let slow = try PostgresConnection(url: url, timeout: 5)
            try slow.execute("BEGIN")
            try slow.execute("UPDATE downloads SET state = 'paused' WHERE id = 'x'")
            var y = StateFixture.download("y", .downloading)
            y.verifiedOffset = 10
            try store.commit(StateBatch(upserts: [y]))
            try c.expect(feed.stamp() == 1, "x's change is not committed: nothing of it")
            let first = try feed.changes(after: cursor)
            c.expect(Self.told(first.changes) == ["row y downloading"] && !first.more)
            cursor = try c.require(first.changes.last?.version)

            try slow.execute("COMMIT")
            try c.expect(feed.stamp() == 2)
            let second = try feed.changes(after: cursor)
            c.expect(Self.told(second.changes) == ["changed x downloading>paused", "row x paused"], "the late commit comes above the cursor")
            cursor = try c.require(second.changes.last?.version)

            // Only hb_at changes: no new stamp. A deletion: logged, with its tombstone's cause.
            try slow.execute("UPDATE downloads SET hb_at = now() WHERE id = 'x'")
            try c.expect(feed.stamp() == 0)
            try store.commit(StateBatch(deletions: ["y"], tombstones: [TombstoneContractTests.tombstone("y", at: 5, by: .operator)]))
            try c.expect(feed.stamp() == 1)
            let third = try feed.changes(after: cursor)
            c.expect(Self.told(third.changes) == ["removed y operator"] && third.changes.first?.row == nil)
        }
    }

    /// The window between the stamper's two statements: a download committed after the log
    /// statement looked but before the rows statement looks. Held here by locking its log entry
    /// from another connection (the log statement skips locked entries, as it cannot see one that
    /// commits after it began): its row waits for the entry, so `created` comes first.
    @Test func aRowIsNeverStampedBeforeItsCreatedEntry() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2))
            let feed = ClusterFeedStore(pool: store.pool)
            let cursor = try feed.start().version
            try store.commit(StateBatch(upserts: [StateFixture.download("y", .downloading)]))
            let stamper = try PostgresConnection(url: url, timeout: 5)
            try stamper.execute("BEGIN")
            try c.expect(stamper.execute("SELECT n FROM feed_log WHERE id = 'y' FOR UPDATE").rows.count == 1)
            try c.expect(feed.stamp() == 0, "the row waits for its entry")
            try c.expect(feed.changes(after: cursor).changes.isEmpty)
            try stamper.execute("COMMIT")
            try c.expect(feed.stamp() == 2)
            let told = try feed.changes(after: cursor)
            c.expect(Self.told(told.changes) == ["created y downloading", "row y downloading"], "\(Self.told(told.changes))")

            // Its reader tells the download created, as a watcher of another replica expects.
            var state = ClusterFeedState(version: cursor, rows: [], ignoring: [])
            let kinds = told.changes.compactMap { state.apply($0) }
            guard case .created(let snapshot)? = kinds.first else { return c.expect(false, "\(kinds)") }
            c.expect(snapshot.id == "y")
        }
    }
}
