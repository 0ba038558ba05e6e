import Foundation
import Testing
@testable import DownloaderEngine

/// A completed download stays with its holder while callers keep joining it, live (engines in one
/// process on one real PostgreSQL, `ClusterLeaseLiveTests.replica`): let go after each join, a
/// burst of callers on every replica made the lease hop between them and forwarded requests find
/// it gone (`503 held_elsewhere`). Once the callers stop it is let go, and another replica answers.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterLingerLiveTests {
    typealias Live = ClusterLeaseLiveTests

    @Test func aCompletedDownloadStaysWithItsHolderWhileCallersKeepJoiningThenGoes() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let origin = try TestOrigin(bodySize: 256 << 10)
            defer { origin.stop() }
            let shared = Live.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            // A linger far longer than a loaded machine's gap between two joins, so the check cannot race it.
            let a = try Live.replica("a", database: database, shared: shared) { $0.clusterReplica.completedLinger = 3 }
            let b = try Live.replica("b", database: database, shared: shared) { $0.clusterReplica.completedLinger = 3 }
            defer { Live.shutdown([a, b]) }
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            try c.expect(try Live.wait(20) { try Live.state(of: id, database) == "completed" }, "the download completes")
            c.expect(Live.wait(5) { a.snapshot(id: id)?.state == .completed }, "a has it completed")
            for round in 0..<6 {
                let joined = try a.request(DownloadRequest(url: origin.url))
                c.expect(joined.snapshot.id == id && joined.snapshot.state == .completed, "round \(round): a answers")
                do throws(EngineError) {
                    let taken = try b.request(DownloadRequest(url: origin.url))
                    c.expect(Bool(false), "round \(round): b took the lease a had a moment ago (\(taken.snapshot.state))")
                } catch {
                    c.expect(error.code == .heldElsewhere && error.ownerURL == "http://a.invalid", "round \(round): \(error)")
                }
                usleep(200_000)
            }
            c.expect(a.statistics.cluster?.leasesHeld == 1, "a still holds it")
            try c.expect(try Live.wait(10) { try Live.letGo(a, database) }, "a lets it go once nobody joined for the linger")
            let there = try b.request(DownloadRequest(url: origin.url))
            c.expect(there.snapshot.id == id && there.snapshot.state == .completed, "then b answers: \(there.snapshot.state)")
            c.expect(origin.getCount() == 1, "never fetched again: \(origin.getCount())")
        }
    }
}
