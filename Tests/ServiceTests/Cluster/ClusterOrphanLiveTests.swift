import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// The cluster janitor's sweep of the shared areas, live (one replica on a real PostgreSQL): files
/// no row names go once older than the safe age, a tombstoned download's files at once (its remover
/// crashed before deleting them), and every file a row names, or not named like ours, stays.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterOrphanLiveTests {
    typealias Live = ClusterLeaseLiveTests
    static let age: Double = 4

    @Test func theJanitorDeletesOrphansOnceOldAndATombstonesFilesAtOnce() async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let shared = Live.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let engine = try ClusterJanitorLiveTests.replica("a", database: database, shared: shared) {
                $0.orphanSweepInterval = 0.2
                $0.orphanMinimumAge = Self.age
            }
            defer { Live.shutdown([engine]) }
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 2))
            let (partials, cache, data) = (engine.core.store.partialDirectory, engine.core.store.cacheDirectory, engine.core.store.dataDirectory)
            let now = Date().timeIntervalSince1970
            // A completed download (its file stays) and a paused one whose lease is at its second epoch.
            let done = "00000000000000a1", paused = "00000000000000a2", lost = "00000000000000a3", removed = "00000000000000a4"
            try ClusterJanitorLiveTests.seed(try ClusterReadsTests.completed(ClusterReadsTests.row(done, .paused, created: now),
                                                                            at: cache + "/\(done).1-\(done).bin"),
                                             key: "http://o.test/\(done)", store)
            for _ in 0..<2 {
                try ClusterJanitorLiveTests.seed(ClusterReadsTests.row(paused, .paused, created: now, offset: 5),
                                                 key: "http://o.test/\(paused)", store)
            }
            _ = try PostgresConnection(url: database, timeout: 5)
                .execute("INSERT INTO tombstones (id, url, removed_at, removed_by, paths) VALUES ($1, $2, $3, 'operator', $4)",
                         [removed, "http://o.test/\(removed)", String(now), data + "/\(removed).1-\(removed).bin"])
            let kept = [cache + "/\(done).1-\(done).bin", partials + "/\(paused).2.part", cache + "/notes.txt"]
            let orphans = [partials + "/\(paused).1.part", partials + "/\(lost).1.part", cache + "/\(lost).1-\(lost).bin",
                           cache + "/\(done).1-\(done).bin.3.trash"]
            let buried = data + "/\(removed).1-\(removed).bin"
            let made = Date()
            for path in kept + orphans + [buried] where !FileManager.default.fileExists(atPath: path) {
                c.expect(FileManager.default.createFile(atPath: path, contents: Data("bytes".utf8)), "made \(path)")
            }
            c.expect(Live.wait(10) { !FileManager.default.fileExists(atPath: buried) }, "the tombstone's file goes")
            c.expect(Date().timeIntervalSince(made) < Self.age, "at once, not once old: \(Date().timeIntervalSince(made)) s")
            c.expect(Live.wait(Self.age + 15) { orphans.allSatisfy { !FileManager.default.fileExists(atPath: $0) } }, "the orphans go")
            let took = Date().timeIntervalSince(made)
            // A file's mtime comes from the kernel's coarse clock, a tick (up to 10 ms) behind `made`.
            c.expect(took >= Self.age - 0.02, "not before they are \(Self.age) s old: \(took) s")
            for path in kept { c.expect(FileManager.default.fileExists(atPath: path), "\(path) stays") }
            c.expect(engine.statistics.cluster?.janitor == true)
        }
    }
}
