import Foundation
import Testing
@testable import DownloaderEngine

/// Purge order and reasons with an injected pressure monitor: paused partials first (oldest first),
/// then least-recently-used cache files; running downloads and the persistent area never.
@Suite struct EnginePressureTests {
    /// An engine whose driver serves `/c*` and `/p*` at once (10 000 bytes), `/b*` (30 000 bytes),
    /// and leaves the rest to the test.
    struct Setup {
        let root = EngineFixture.root()
        let clock = ManualScheduler()
        let monitor = ManualPressureMonitor()
        let log = PurgeLog()
        let driver: FakeTransferDriver
        let engine: DownloadEngine

        init(minFree: Int64 = 50_000, configure: (inout EngineConfiguration) -> Void = { _ in }) throws {
            let body = EngineFixture.body(10_000), big = EngineFixture.body(30_000)
            driver = FakeTransferDriver { request, _ in
                let name = request.url.split(separator: "/").last.map(String.init) ?? ""
                if name.hasPrefix("b") { return .init(status: 200, headers: ["Content-Length": "30000", "ETag": "\"\(name)\""], body: big) }
                return name.hasPrefix("c") || name.hasPrefix("p")
                    ? .init(status: 200, headers: ["Content-Length": "10000", "ETag": "\"\(name)\""], body: body) : nil
            }
            var c = EngineFixture.configuration(root)
            c.maxConcurrentTransfers = 8
            configure(&c)
            engine = try DownloadEngine(configuration: c, driver: driver, scheduler: clock,
                                        diskPressure: DiskPressure(minFreeBytes: minFree, minFreeFraction: 0), pressure: monitor)
            let log = self.log
            engine.onPurge { log.append($0) }
        }

        var statePath: String { root.appendingPathComponent("state").path }
        var cachePath: String { root.appendingPathComponent("cache").path }

        func completed(_ name: String, storage: StorageClass = .cache) async throws -> String {
            let (r, s) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/\(name)", storage: storage),
                                                                until: [.completed, .failed])
            #expect(s.state == .completed)
            clock.advance(1)
            return r.snapshot.id
        }

        /// A download left holding `kept` bytes: paused (`pause`) or still running.
        func partial(_ name: String, kept: Int, pause: Bool = true, client: String? = nil) async throws -> String {
            let r = try await EngineFixture.partial(engine, driver: driver, url: "http://o.test/\(name)", attempt: driver.startCount,
                                                    headers: ["Content-Length": "100000", "ETag": "\"\(name)\""],
                                                    sending: EngineFixture.body(kept), pause: pause, client: client)
            clock.advance(1)
            return r.snapshot.id
        }

        func kept(_ id: String) -> Int64? { engine.snapshot(id: id)?.bytesWritten }
        func summary(_ events: [PurgeEvent]) -> [String] { events.map { "\($0.kind.rawValue):\($0.reason.rawValue):\($0.id)" } }
    }

    /// Partials in memory (the state area on tmpfs): memory pressure purges every paused one.
    @Test func memoryPressurePurgesEveryPausedPartialOldestFirstAndNothingElse() async throws {
        let s = try Setup()
        s.monitor.setSpace(s.statePath, free: 1 << 40, inMemory: true)
        let cached = try await s.completed("c1")
        let persistent = try await s.completed("p1", storage: .persistent)
        let older = try await s.partial("x", kept: 8000)
        let newer = try await s.partial("y", kept: 6000)
        let running = try await s.partial("r", kept: 5000, pause: false)
        s.monitor.setMemoryPressure(true)
        s.monitor.fire()
        let events = try await s.log.wait(for: 2)
        #expect(s.summary(events) == ["paused_partial:memory:\(older)", "paused_partial:memory:\(newer)"])
        #expect(events.map(\.bytes) == [8000, 6000])
        #expect(s.kept(older) == 0 && s.kept(newer) == 0)
        #expect(s.engine.snapshot(id: older)?.state == .paused)
        #expect(s.engine.snapshot(id: running)?.state == .downloading && s.kept(running) == 5000)
        #expect(s.engine.completedFile(id: cached) != nil && s.engine.completedFile(id: persistent) != nil)
        #expect(s.engine.statistics.purges[PurgeCounterKey(kind: .pausedPartial, reason: .memory)] == 2)
        await s.engine.shutdown()
    }

    /// The state area on a disk: deleting its files frees no memory, so memory pressure deletes
    /// no paused partial.
    @Test func memoryPressureLeavesPartialsOnADiskAlone() async throws {
        let s = try Setup()
        let paused = try await s.partial("x", kept: 8000)
        s.monitor.setMemoryPressure(true)
        s.monitor.fire()
        s.monitor.fire()
        #expect(try await s.log.wait(for: 1, timeout: 0.5).isEmpty)
        #expect(s.kept(paused) == 8000)
        await s.engine.shutdown()
    }

    /// An operator's hold keeps a download's `/fetch` readers waiting on its partial: a purge would
    /// delete the file they read from (they would send on from the deleted file, cut short).
    @Test func aPausedPartialWithReadersIsNotPurged() async throws {
        let s = try Setup()
        let held = try await s.partial("h", kept: 7000, pause: false)
        let reader = try s.engine.attachReader(DownloadRequest(url: "http://o.test/h"))
        defer { reader.close() }
        let sub = try #require(s.engine.subscribe(id: held))
        guard case .done = s.engine.operatorPause(id: held) else { Issue.record("not paused"); return }
        _ = try await withTimeout(20) { await EngineFixture.events(sub) { if case .paused = $0 { true } else { false } } }
        let other = try await s.partial("x", kept: 8000)
        s.monitor.setSpace(s.statePath, free: 1 << 40, inMemory: true)
        s.monitor.setMemoryPressure(true)
        s.monitor.fire()
        let events = try await s.log.wait(for: 1)
        #expect(s.summary(events) == ["paused_partial:memory:\(other)"])
        #expect(s.kept(held) == 7000)
        await s.engine.shutdown()
    }

    @Test func lowStateAreaPurgesOldestPausedPartialsUntilTheMinimumIsBack() async throws {
        let s = try Setup(minFree: 50_000)
        let a = try await s.partial("xa", kept: 8000)
        let b = try await s.partial("xb", kept: 8000)
        let c = try await s.partial("xc", kept: 8000)
        let cached = try await s.completed("c1")
        // The cache area is elsewhere (another file system) and roomy: no cache file goes.
        s.monitor.setSpace(s.statePath, free: 40_000, fileSystem: 1)
        s.monitor.setSpace(s.cachePath, free: 1 << 40, fileSystem: 2)
        s.monitor.fire()
        let events = try await s.log.wait(for: 2)
        #expect(s.summary(events) == ["paused_partial:disk:\(a)", "paused_partial:disk:\(b)"])
        #expect(s.kept(a) == 0 && s.kept(b) == 0 && s.kept(c) == 8000)
        // Deleted after the engine's lock, perhaps by another thread: a bounded wait.
        let partial = s.root.appendingPathComponent("state/partials/\(a).part").path
        let deadline = Date().addingTimeInterval(5)
        while FileStore.fileSize(partial) != nil && Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(FileStore.fileSize(partial) == nil)
        #expect(s.engine.completedFile(id: cached) != nil)
        await s.engine.shutdown()
    }

    @Test func lowSharedDiskPurgesPausedPartialsThenLeastRecentlyUsedCacheFiles() async throws {
        let s = try Setup(minFree: 50_000)
        let c1 = try await s.completed("c1")
        let c2 = try await s.completed("c2")
        let c3 = try await s.completed("c3")
        let persistent = try await s.completed("p1", storage: .persistent)
        _ = s.engine.completedFile(id: c1)  // c1 is now the most recently used.
        let paused = try await s.partial("x", kept: 8000)
        let running = try await s.partial("r", kept: 4000, pause: false)
        // One file system for every area, 30 000 bytes free: the partial (8 000) and two cache files
        // (10 000 each, least recently used first: c2, c3) bring it back over 50 000.
        s.monitor.setSpace(s.root.path, free: 30_000)
        s.monitor.fire()
        let events = try await s.log.wait(for: 3)
        #expect(s.summary(events) == ["paused_partial:disk:\(paused)", "cache_file:disk:\(c2)", "cache_file:disk:\(c3)"])
        #expect(s.engine.snapshot(id: c2) == nil && s.engine.snapshot(id: c3) == nil)
        #expect(s.engine.completedFile(id: c1) != nil && s.engine.completedFile(id: persistent) != nil)
        #expect(s.kept(running) == 4000 && s.engine.snapshot(id: running)?.state == .downloading)
        #expect(s.engine.statistics.purges[PurgeCounterKey(kind: .cacheFile, reason: .disk)] == 2)
        await s.engine.shutdown()
    }

    /// A check that runs before the last one's deletions are done (a tick, the check before an
    /// attempt) counts their bytes as free: it purges nothing more for the same shortfall (its
    /// sample cannot see them yet). Once done, they are uncounted.
    @Test func bytesBeingDeletedCountAsFreeUntilTheyAre() async throws {
        let s = try Setup(minFree: 50_000)
        let c1 = try await s.completed("c1")
        let c2 = try await s.completed("c2")
        let c3 = try await s.completed("c3")
        let paused = try await s.partial("x", kept: 8000)
        let gate = DispatchSemaphore(value: 0)
        s.engine.core.locked { s.engine.core.hooks.beforeRemove = { _ = gate.wait(timeout: .now() + 20) } }
        // 33 000 free: the partial (8 000) and one cache file (10 000) bring it back over 50 000.
        s.monitor.setSpace(s.root.path, free: 33_000)
        s.monitor.fire()
        #expect(s.summary(try await s.log.wait(for: 2)) == ["paused_partial:disk:\(paused)", "cache_file:disk:\(c1)"])
        #expect(s.engine.core.freeing.pending(.partials) == 8000 && s.engine.core.freeing.pending(.cache) == 10_000)
        s.monitor.fire()  // The sample still says 33 000: the deletions wait.
        #expect(s.engine.snapshot(id: c2) != nil && s.engine.snapshot(id: c3) != nil, "nothing more purged")
        #expect(s.engine.statistics.purges.values.reduce(0, +) == 2)
        // Later deletions (the shutdown's) must not each hold a work-queue thread for 20 s: the
        // process's other engines share those threads.
        s.engine.core.locked { s.engine.core.hooks.beforeRemove = nil }
        gate.signal()
        gate.signal()
        try await withTimeout(20) {
            while s.engine.core.freeing.pending(.partials) + s.engine.core.freeing.pending(.cache) > 0 {
                try await Task.sleep(nanoseconds: 5_000_000)
            }
        }
        await s.engine.shutdown()
    }

    @Test func lowDiskBeforeAnAttemptPurgesPausedPartialsFirst() async throws {
        let s = try Setup(minFree: 50_000)
        let paused = try await s.partial("x", kept: 8000)
        s.monitor.setSpace(s.root.path, free: 45_000)
        _ = try await s.partial("y", kept: 1000, pause: false)  // The new attempt checks the disk first.
        let events = try await s.log.wait(for: 1)
        #expect(s.summary(events) == ["paused_partial:disk:\(paused)"])
        await s.engine.shutdown()
    }

    @Test func pausedPartialsExpireAfterTheirTTL() async throws {
        let s = try Setup { $0.pausedTTL = 100 }
        let old = try await s.partial("x", kept: 8000)
        s.clock.advance(60)
        let young = try await s.partial("y", kept: 3000)
        s.monitor.fire()
        #expect(s.kept(old) == 8000)
        s.clock.advance(50)  // old: 111 s, young: 50 s.
        s.monitor.fire()
        let events = try await s.log.wait(for: 1)
        #expect(s.summary(events) == ["paused_partial:ttl:\(old)"])
        #expect(s.engine.snapshot(id: old) == nil)
        #expect(s.kept(young) == 3000)
        await s.engine.shutdown()
    }

    /// A credentialed download restored without its headers waits, paused and without bytes, for a
    /// caller who brings them. Its callers' tokens do not keep it forever: past `pausedTTL` it goes
    /// like any paused download.
    @Test func pausedDownloadsWithCallersButNoBytesExpireAfterTheTTL() async throws {
        let s = try Setup { $0.pausedTTL = 100 }
        let r = try s.engine.request(DownloadRequest(url: "http://o.test/secret", headers: ["Authorization": "Bearer x"]))
        try await withTimeout(20) { await s.driver.waitForStarts(1) }
        await s.engine.shutdown()
        var c = EngineFixture.configuration(s.root)
        c.pausedTTL = 100
        let next = try DownloadEngine(configuration: c, driver: FakeTransferDriver(), scheduler: s.clock,
                                      diskPressure: DiskPressure(minFreeBytes: 0, minFreeFraction: 0), pressure: s.monitor)
        #expect(next.snapshot(id: r.snapshot.id)?.state == .paused)
        #expect(next.liveTokens(among: [r.token]) == [r.token])
        s.clock.advance(60)
        s.monitor.fire()
        #expect(next.snapshot(id: r.snapshot.id)?.state == .paused)
        s.clock.advance(50)
        s.monitor.fire()
        #expect(next.snapshot(id: r.snapshot.id) == nil)
        #expect(next.liveTokens(among: [r.token]).isEmpty)
        await next.shutdown()
    }

    @Test func cacheLimitPurgesAreCountedWithTheirReason() async throws {
        let s = try Setup { $0.cacheMaxBytes = 25_000 }
        let paused = try await s.partial("x", kept: 8000)
        let c1 = try await s.completed("c1")
        _ = try await s.completed("c2")
        _ = try await s.completed("c3")
        let events = try await s.log.wait(for: 2)
        #expect(s.summary(events) == ["paused_partial:cache_limit:\(paused)", "cache_file:cache_limit:\(c1)"])
        #expect(s.engine.statistics.purges[PurgeCounterKey(kind: .cacheFile, reason: .cacheLimit)] == 1)
        await s.engine.shutdown()
    }

    /// A file larger than the whole budget can never fit: it goes alone, first, and nothing else
    /// is purged to make room for it (everything was, and then it too).
    @Test func aFileLargerThanTheWholeBudgetGoesAloneAndFirst() async throws {
        let s = try Setup { $0.cacheMaxBytes = 25_000 }
        let c1 = try await s.completed("c1")
        let paused = try await s.partial("x", kept: 8000)
        // Purged as it completes: waited for by its purge (a wait for `completed` may find it gone).
        let big = try s.engine.request(DownloadRequest(url: "http://o.test/big")).snapshot.id
        let events = try await s.log.wait(for: 1)
        #expect(s.summary(events) == ["cache_file:cache_limit:\(big)"])
        #expect(s.engine.completedFile(id: c1) != nil && s.kept(paused) == 8000)
        #expect(s.engine.completedFile(id: big) == nil)
        await s.engine.shutdown()
    }

    /// The budget holds also while nothing completes: partials that callers left pile up, and the
    /// next tick purges them (oldest first) down to the budget.
    @Test func theCacheBudgetHoldsAtEveryTickNotOnlyAtACompletion() async throws {
        let s = try Setup { $0.cacheMaxBytes = 10_000 }
        let older = try await s.partial("x", kept: 8000)
        let newer = try await s.partial("y", kept: 6000)
        #expect(s.log.all.isEmpty, "nothing completed: nothing purged yet")
        let subscription = try #require(s.engine.subscribe(id: older))
        s.monitor.fire()
        let events = try await s.log.wait(for: 1)
        #expect(s.summary(events) == ["paused_partial:cache_limit:\(older)"])
        #expect(s.kept(older) == 0 && s.kept(newer) == 6000)
        // Its watchers are told the kept bytes went.
        let told = try await withTimeout(20) { await EngineFixture.events(subscription) { $0.snapshot.bytesWritten == 0 } }
        #expect(told.last?.snapshot.bytesWritten == 0 && told.last?.snapshot.state == .paused)
        await s.engine.shutdown()
    }

    /// Starts a download of each name and cancels its only caller once it started: each settles
    /// paused with no bytes, a second apart. Their ids, in order.
    static func pausedWithoutBytes(_ s: Setup, _ names: [String]) async throws -> [String] {
        var ids: [String] = []
        for name in names {
            let before = s.driver.startCount
            let r = try s.engine.request(DownloadRequest(url: "http://o.test/\(name)"))
            try await withTimeout(20) { await s.driver.waitForStarts(before + 1) }
            _ = try await EngineFixture.cancelAndSettle(s.engine, token: r.token, id: r.snapshot.id)
            s.clock.advance(1)
            ids.append(r.snapshot.id)
        }
        return ids
    }

    /// A pause bounds the empty paused downloads seen before it without a pass over every download
    /// and without waiting for the pressure tick: the fourth pause forgets the first (the third,
    /// still settling at its own pause, is counted by the next).
    @Test func aPauseBoundsTheEmptyPausedDownloadsItHasSeen() async throws {
        let s = try Setup { $0.maxEmptyPausedDownloads = 2 }
        let ids = try await Self.pausedWithoutBytes(s, ["e1", "e2", "e3", "e4"])
        #expect(s.engine.snapshot(id: ids[0]) == nil)
        #expect(ids[1...].allSatisfy { s.engine.snapshot(id: $0)?.state == .paused })
        await s.engine.shutdown()
    }

    @Test func pausedDownloadsWithoutBytesAreBoundedInCount() async throws {
        let s = try Setup { $0.maxEmptyPausedDownloads = 2 }
        let ids = try await Self.pausedWithoutBytes(s, ["e1", "e2", "e3"])
        // Settled as paused with no bytes; the next pause or tick bounds them.
        let watcher = s.engine.watchAll()!
        s.monitor.fire()
        #expect(s.engine.snapshot(id: ids[0]) == nil)
        // /events tells it removed (by retention), as cluster mode does, instead of keeping it. (The
        // watcher's snapshot and the event are handed over after the engine's lock, perhaps by
        // another thread: a bounded wait.)
        var removed: [String] = []
        let deadline = Date().addingTimeInterval(5)
        while removed.isEmpty && Date() < deadline {
            guard case .item(let item) = watcher.poll(waker: {}) else {
                try await Task.sleep(nanoseconds: 10_000_000)
                continue
            }
            if case .event(.removed(let by, let snapshot)) = item.kind, by == .retention { removed.append(snapshot.id) }
        }
        #expect(removed == [ids[0]])
        watcher.cancel()
        #expect(s.engine.snapshot(id: ids[1])?.state == .paused && s.engine.snapshot(id: ids[2])?.state == .paused)
        // Its empty `.part` goes with it (it stayed until the next start: one file per forgotten download).
        let partials = s.statePath + "/partials/"
        #expect(FileStore.fileSize(partials + "\(ids[1]).part") == 0, "the attempt's file, kept with its download")
        let gone = Date().addingTimeInterval(5)
        while FileStore.fileSize(partials + "\(ids[0]).part") != nil && Date() < gone { try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(FileStore.fileSize(partials + "\(ids[0]).part") == nil)
        await s.engine.shutdown()
    }
}
