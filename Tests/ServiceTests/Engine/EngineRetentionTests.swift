import Foundation
import Testing
@testable import DownloaderEngine

/// `cacheTTL` on a manual clock: a completed cache file not asked for within the TTL is removed
/// (by retention) within the TTL plus the larger of 1 s and a tenth of the TTL; asking for it resets
/// the clock; persistent files stay.
@Suite struct EngineRetentionTests {
    @Test(arguments: [(ttl: 2.0, lateness: 1.0), (ttl: 100.0, lateness: 10.0)])
    func anUnaskedCacheFileIsRemovedWithinTheTTLAndItsLateness(_ c: (ttl: Double, lateness: Double)) async throws {
        #expect(RetentionSchedule.allowedLateness(ttl: c.ttl) == c.lateness)
        let clock = ManualScheduler()
        let body = EngineFixture.body(3000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "3000"], body: body) }
        let root = EngineFixture.root()
        let stories = StoryRecorder()
        let engine = try EngineFixture.engine(root, driver: driver, scheduler: clock) {
            $0.cacheTTL = c.ttl
            $0.storyteller = stories.tell
        }
        let cached = try engine.request(DownloadRequest(url: "http://o.test/c"))
        let kept = try engine.request(DownloadRequest(url: "http://o.test/p", storage: .persistent))
        for id in [cached.snapshot.id, kept.snapshot.id] {
            try await withTimeout(20) {
                while engine.snapshot(id: id)?.state != .completed { try await Task.sleep(nanoseconds: 5_000_000) }
            }
        }
        let file = try #require(engine.completedFile(id: cached.snapshot.id)).path  // asked for: the clock starts now
        clock.advance(c.ttl * 0.9)
        #expect(engine.snapshot(id: cached.snapshot.id) != nil)
        // Asking again (POST) resets the clock.
        _ = try engine.request(DownloadRequest(url: "http://o.test/c"))
        clock.advance(c.ttl * 0.9)
        #expect(engine.snapshot(id: cached.snapshot.id) != nil, "the request reset the clock")
        clock.advance(c.ttl * 0.1 + c.lateness)
        #expect(engine.snapshot(id: cached.snapshot.id) == nil, "purged within TTL + lateness")
        // Told (logged) as a purge and as a removal by retention.
        let told = try await stories.wait(for: cached.snapshot.id) { $0 == .removed(by: .retention) }
        let purged = told.firstIndex(of: .purged(kind: .cacheFile, reason: .ttl, bytes: 3000))
        #expect(purged != nil && purged! < told.firstIndex(of: .removed(by: .retention))!, "the purge, then the removal")
        #expect(engine.statistics.purges[PurgeCounterKey(kind: .cacheFile, reason: .ttl)] == 1)
        try await withTimeout(20) { while FileStore.fileSize(file) != nil { try await Task.sleep(nanoseconds: 5_000_000) } }
        // The persistent file stays, however long.
        clock.advance(c.ttl * 10)
        #expect(engine.completedFile(id: kept.snapshot.id) != nil)
        // Asked for again: a new download.
        #expect(try engine.request(DownloadRequest(url: "http://o.test/c")).snapshot.id != cached.snapshot.id)
    }

    /// `/fetch`'s `changed` window is read on the engine's clock (where the change was stamped),
    /// not the wall clock: ten minutes of it after the change, and no more.
    @Test func theChangedWindowRunsOnTheEnginesClock() async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "10"], body: EngineFixture.body(10)) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { _ in }
        let id = try engine.request(DownloadRequest(url: "http://o.test/c")).snapshot.id
        #expect(!engine.changed(id: id, within: 600))
        engine.core.locked { engine.core.byID[id]?.changedAt = clock.now() }
        clock.advance(599)
        #expect(engine.changed(id: id, within: 600))
        clock.advance(2)
        #expect(!engine.changed(id: id, within: 600))
        engine.core.locked { engine.core.byID[id]?.changedAt = clock.now().addingTimeInterval(3600) }
        #expect(engine.changed(id: id, within: 600), "stamped ahead (the clock stepped back since): within")
        await engine.shutdown()
    }

    /// Serving the file resets the retention clock durably: a commit with the new access time
    /// follows on its own (a crash must not bring an earlier purge), not only with the next change.
    @Test func servingTheFileCommitsTheNewAccessTime() async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "3"], body: [1, 2, 3]) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.cacheTTL = 100 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/c"))
        try await withTimeout(20) {
            while engine.snapshot(id: r.snapshot.id)?.state != .completed { try await Task.sleep(nanoseconds: 5_000_000) }
        }
        #expect(engine.core.stateWriter.flush())
        let committed = OriginLock<[Date]>([])
        engine.core.stateWriter.gateCommits { batch in
            committed.withLock { $0 += batch.upserts.filter { $0.id == r.snapshot.id }.map(\.lastAccess) }
        }
        clock.advance(50)
        let served = clock.now()
        #expect(engine.completedFile(id: r.snapshot.id) != nil)
        try await withTimeout(20) {
            while !committed.withLock({ $0.contains(served) }) {
                clock.advance(0.5)  // the writer's pace is on the engine's clock
                try await Task.sleep(nanoseconds: 5_000_000)
            }
        }
        await engine.shutdown()
    }

    @Test(arguments: [10.0, nil])
    func servingTheFileResetsTheClockAndOffMeansNever(_ ttl: Double?) async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "3"], body: [1, 2, 3]) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.cacheTTL = ttl }
        let r = try engine.request(DownloadRequest(url: "http://o.test/c"))
        try await withTimeout(20) {
            while engine.snapshot(id: r.snapshot.id)?.state != .completed { try await Task.sleep(nanoseconds: 5_000_000) }
        }
        for _ in 0..<5 {
            clock.advance(8)
            #expect(engine.completedFile(id: r.snapshot.id) != nil)
        }
        clock.advance(ttl == nil ? 1_000_000 : 12)
        #expect((engine.snapshot(id: r.snapshot.id) == nil) == (ttl != nil))
    }
}
