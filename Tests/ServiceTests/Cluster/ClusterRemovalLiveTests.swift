import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// The operator's removals and holds across replicas (engines in one process on one real
/// PostgreSQL, as `ClusterLeaseLiveTests`): a download removed on one replica never comes back on
/// another (a later request starts afresh under a new id), a hold placed on one is kept on another.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterRemovalLiveTests {
    typealias Live = ClusterLeaseLiveTests

    @Test func aDownloadRemovedOnOneReplicaIsNeverResurrectedByAnother() async throws {
        try await Live.withReplicas { c, database, origin, a, b in
            let first = try a.request(DownloadRequest(url: origin.url))
            let id = first.snapshot.id
            try c.expect(try Live.wait(10) { (try Live.leaseRow(database)?.durable ?? 0) >= 128 << 10 }, "a checkpoint reached the lease row")
            do throws(EngineError) {
                _ = try b.removing(id: id)
                c.expect(false, "b removed a download a holds")
            } catch {
                c.expect(error.code == .heldElsewhere, "\(error)")
            }
            let partial = a.core.partialPath(of: try c.require(a.core.locked { a.core.byID[id] }))
            let removed = try a.removing(id: id)
            c.expect(removed?.id == id)
            c.expect(Live.wait(5) { a.statistics.cluster?.leasesHeld == 0 }, "a lets the removed download go")
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 1))
            try c.expect(store.load(id: id) == nil && store.downloadID(ofToken: TokenHash(token: first.token)) == nil)
            let tombstone = try c.require(store.loadTombstones().first)
            c.expect(tombstone.id == id && tombstone.by == .operator && tombstone.paths.contains(partial))
            c.expect(Live.wait(5) { FileStore.fileSize(partial) == nil }, "its partial is deleted")

            // Every other replica reads it as gone, and a request starts afresh under a new id.
            c.expect(b.snapshot(id: id) == nil && b.operatorPause(id: id) == .unknown && b.remove(id: id) == nil)
            c.expect(b.cancel(token: first.token) == nil)
            let gets = origin.getCount()
            // a releases the URL's lease just after its row and tombstone are written.
            c.expect(Live.wait(5) { b.placement(of: DownloadRequest(url: origin.url)) == .here })
            let again = try b.request(DownloadRequest(url: origin.url))
            c.expect(again.snapshot.id != id, "a new id")
            try c.expect(try Live.wait(20) { try Live.state(of: again.snapshot.id, database) == "completed" }, "the new download completes")
            c.expect(origin.requests(path: "/file").filter { $0.method == "GET" }.last?.header("Range") == nil, "from 0, nothing resumed")
            c.expect(origin.getCount() == gets + 1)
            try c.expect(store.load(id: id) == nil, "the removed id never came back")
            c.expect(b.snapshot(id: id) == nil && a.snapshot(id: id) == nil)
        }
    }

    /// A removal whose commit comes after its lease ran out (the database lost for longer than the
    /// lease) is refused there: the row stays, and so does the file it names. The files used to be
    /// deleted all the same, leaving a completed row without its file.
    @Test func aRemovalRefusedByItsLeaseKeepsTheFiles() async throws {
        try await Live.withReplicas { c, database, origin, a, _ in
            origin.addResource(path: "/small", size: 64 << 10)
            let id = try a.request(DownloadRequest(url: origin.url("/small"))).snapshot.id
            try c.expect(try Live.wait(20) { try Live.state(of: id, database) == "completed" }, "completes")
            let file = try c.require(a.completedFile(id: id)?.path)
            let failing = Atomic(true)
            a.core.stateWriter.gateCommits { _ throws(StateStoreError) in
                if failing.load(ordering: .relaxed) { throw StateStoreError(kind: .other, message: "test: the database is lost") }
            }
            let keeper = try c.require(a.core.cluster?.keeper)
            keeper.paused.store(true, ordering: .releasing)  // nor are leases renewed
            do throws(EngineError) {
                _ = try a.removing(id: id)
                c.expect(false, "answered as recorded")
            } catch {
                c.expect(error.code == .stateUnavailable, "\(error)")
            }
            usleep(useconds_t((Live.ttl + 1) * 1_000_000))  // the removal's lease runs out in the database
            failing.store(false, ordering: .relaxed)
            c.expect(a.core.stateWriter.flush())
            a.core.workQueue.sync(flags: .barrier) {}
            usleep(500_000)
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 1))
            try c.expect(store.load(id: id)?.state == .completed, "the tombstone was refused: the row stays")
            c.expect(FileStore.fileSize(file) == 64 << 10, "and so does its file")
            c.expect(Live.wait(5) { !a.core.locked { a.core.tombstones.contains(id: id) } }, "nor is it read as removed here")
            keeper.paused.store(false, ordering: .releasing)
        }
    }

    @Test func aHoldPlacedOnOneReplicaIsKeptOnAnother() async throws {
        try await Live.withReplicas { c, database, origin, a, b in
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            try c.expect(try Live.wait(10) { (try Live.leaseRow(database)?.durable ?? 0) >= 128 << 10 }, "a checkpoint reached the lease row")
            guard case .done(let paused) = try a.operatorPausing(id: id) else { return c.expect(false, "a pauses") }
            c.expect(paused.state == .paused && paused.pausedBy == .operator)
            try c.expect(try Live.wait(5) { try Live.letGo(a, database) }, "a lets the held download go")
            let gets = origin.getCount()
            c.expect(Live.wait(5) { b.placement(ofID: id) == .here }, "a released the lease")

            // A new caller on b joins the held download: answered paused (by the operator), nothing fetched.
            let joined = try b.request(DownloadRequest(url: origin.url))
            c.expect(joined.snapshot.id == id && joined.snapshot.state == .paused && joined.snapshot.pausedBy == .operator,
                     "\(joined.snapshot.state) \(String(describing: joined.snapshot.pausedBy))")
            usleep(1_000_000)
            c.expect(origin.getCount() == gets, "no transfer started")
            c.expect(b.snapshot(id: id)?.state == .paused && a.snapshot(id: id)?.pausedBy == .operator)
            let held = try PostgresConnection(url: database, timeout: 5).execute("SELECT held FROM downloads WHERE id = $1", [id]).scalar
            c.expect(held == "t")

            // Paused, b let it go again; lifted on a, it runs for b's caller and completes.
            try c.expect(try Live.wait(5) { try Live.letGo(b, database) }, "b lets it go")
            guard case .done = try a.operatorResuming(id: id) else { return c.expect(false, "a resumes") }
            try c.expect(try Live.wait(20) { try Live.state(of: id, database) == "completed" }, "completes")
            c.expect(origin.requests(path: "/file").filter { $0.method == "GET" }.last?.header("Range")?.hasPrefix("bytes=") == true,
                     "resumed from what a kept")
        }
    }
}
