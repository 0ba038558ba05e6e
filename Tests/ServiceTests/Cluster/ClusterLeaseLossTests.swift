import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A holder whose lease stops while its attempt runs: the attempt's end (a refused write, a file
/// not published) is no verdict on the download, which another replica carries on.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterLeaseLossTests {
    /// The cluster queue, where the lease's stop is acted on, is held busy (as by takeovers and
    /// flushes while the database is slow), so the attempt refused its write settles first. Before,
    /// it settled as `failed` (`disk_error`, "Operation not permitted"): told to this replica's
    /// subscribers and readers while another replica took the download over.
    @Test func anAttemptEndedByItsLostLeaseNeverFailsTheDownload() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let origin = try TestOrigin(bodySize: 4 << 20, settings: ClusterLeaseLiveTests.throttled)
            defer { origin.stop() }
            let shared = ClusterLeaseLiveTests.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let a = try ClusterLeaseLiveTests.replica("a", database: database, shared: shared)
            defer { ClusterLeaseLiveTests.shutdown([a]) }
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            c.expect(ClusterLeaseLiveTests.wait(10) { (a.snapshot(id: id)?.bytesWritten ?? 0) > 64 << 10 }, "the transfer runs")
            let cluster = try c.require(a.core.cluster)
            let gate = DispatchSemaphore(value: 0)
            cluster.queue.async { _ = gate.wait(timeout: .now() + 30) }
            defer { gate.signal() }
            let hold = try c.require(a.core.locked { a.core.byID[id]?.lease })
            cluster.keeper.paused.store(true, ordering: .releasing)
            let ended = ClusterLeaseLiveTests.wait(ClusterLeaseLiveTests.ttl + 5) {
                hold.isStopped && a.core.locked { a.core.byID[id]?.attempt == nil }
            }
            c.expect(ended, "the write was fenced and the attempt ended")
            c.expect(a.core.locked { a.core.byID[id] } == nil, "evicted: \(String(describing: a.snapshot(id: id)?.state))")
            gate.signal()
            c.expect(ClusterLeaseLiveTests.wait(3) { a.statistics.cluster?.leasesHeld == 0 }, "the lease's stop acted on once the queue is free")
            c.expect(a.core.locked { a.core.byID[id] } == nil)
        }
    }
}
