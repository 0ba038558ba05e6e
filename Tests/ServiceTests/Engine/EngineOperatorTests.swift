import Foundation
import Testing
import Synchronization
@testable import DownloaderEngine

/// The operator's pause, resume and remove on the engine (fake transfers), and their durability
/// across a restart of the engine on the same state.
@Suite struct EngineOperatorTests {
    static let headers = ["Content-Length": "10000", "ETag": "\"e\""]

    /// A download transferring: 4000 of 10 000 bytes written. Returns the request's answer.
    static func transferring(_ engine: DownloadEngine, _ driver: FakeTransferDriver, url: String = "http://o.test/a",
                             attempt: Int = 0) async throws -> Enqueued {
        let r = try engine.request(DownloadRequest(url: url))
        try await withTimeout(20) { await driver.waitForStarts(attempt + 1) }
        let t = driver.transfer(attempt)
        #expect(t.respond(200, headers))
        try t.send(EngineFixture.body(4000))
        return r
    }

    static func next(_ subscription: DownloadSubscription, where stop: @escaping @Sendable (DownloadEvent) -> Bool) async throws -> DownloadEvent {
        let events = try await withTimeout(20) { await EngineFixture.events(subscription, until: stop) }
        return try #require(events.last)
    }

    /// Returns once everything queued on the engine's work queue so far has run (an attempt is
    /// prepared and handed to the driver there; an ended one settles there).
    static func workQueueDrained(_ engine: DownloadEngine) async throws {
        try await onThread { engine.core.workQueue.sync(flags: .barrier) {} }
    }

    @Test func operatorPauseHoldsTheDownloadAgainstItsCallersUntilResumed() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try await Self.transferring(engine, driver)
        let id = r.snapshot.id
        let sub = try #require(engine.subscribe(id: id))
        guard case .done(let paused) = engine.operatorPause(id: id) else { Issue.record("not paused"); return }
        #expect(paused.state == .paused && paused.pausedBy == .operator)
        #expect(driver.transfer(0).isCancelled)
        let event = try await Self.next(sub, where: { if case .paused = $0 { true } else { false } })
        guard case .paused(let told) = event else { Issue.record("not told paused: \(event)"); return }
        #expect(told.pausedBy == .operator && told.bytesWritten == 4000)
        // Idempotent; the caller's token stays valid; a new caller does not resume it.
        #expect(engine.operatorPause(id: id) == .done(try #require(engine.snapshot(id: id))))
        #expect(engine.liveTokens(among: [r.token]) == [r.token])
        let again = try engine.request(DownloadRequest(url: "http://o.test/a"))
        #expect(again.snapshot.id == id && again.snapshot.state == .paused && again.snapshot.pausedBy == .operator)
        try await Self.workQueueDrained(engine)
        #expect(driver.startCount == 1)
        // Resume: callers remain, so it runs again from the kept bytes.
        guard case .done = engine.operatorResume(id: id) else { Issue.record("not resumed"); return }
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("Range") == "bytes=4000-")
        #expect(engine.snapshot(id: id)?.pausedBy == nil)
    }

    @Test func resumeWithoutCallersStaysPausedByCallers() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try await Self.transferring(engine, driver)
        _ = engine.operatorPause(id: r.snapshot.id)
        _ = engine.cancel(token: r.token)
        guard case .done(let s) = engine.operatorResume(id: r.snapshot.id) else { Issue.record("not resumed"); return }
        #expect(s.state == .paused && s.pausedBy == .callers)
        try await Self.workQueueDrained(engine)
        #expect(driver.startCount == 1)
        // A caller now resumes it as usual.
        _ = try engine.request(DownloadRequest(url: "http://o.test/a"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
    }

    @Test func endedOrUnknownDownloadsCannotBePaused() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "3"], body: [1, 2, 3]) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (r, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/a"), until: [.completed])
        #expect(engine.operatorPause(id: r.snapshot.id) == .invalidState(done))
        guard case .invalidState = engine.operatorResume(id: r.snapshot.id) else { Issue.record("resumed a completed download"); return }
        #expect(engine.operatorPause(id: "nope") == .unknown)
        #expect(engine.operatorResume(id: "nope") == .unknown)
        #expect(engine.remove(id: "nope") == nil)
    }

    /// A removal that lands while the transfer is being started (after the driver's `start`, before
    /// the engine holds its handle) still cancels it: nobody wants its bytes.
    @Test func aRemovalDuringTheTransfersStartCancelsIt() async throws {
        let engineBox = Mutex<DownloadEngine?>(nil)
        let removed = Mutex<String?>(nil)
        let driver = FakeTransferDriver { request, index in
            if index == 0, let engine = engineBox.withLock({ $0 }),
               let id = engine.list().first(where: { $0.url == request.url })?.id {
                removed.withLock { $0 = engine.remove(id: id)?.id }
            }
            return nil
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        engineBox.withLock { $0 = engine }
        let r = try engine.request(DownloadRequest(url: "http://o.test/a"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        try await withTimeout(20) { while removed.withLock({ $0 }) == nil { try await Task.sleep(nanoseconds: 5_000_000) } }
        #expect(removed.withLock { $0 } == r.snapshot.id)
        try await withTimeout(20) { while !driver.transfer(0).isCancelled { try await Task.sleep(nanoseconds: 5_000_000) } }
        #expect(engine.snapshot(id: r.snapshot.id) == nil)
    }

    /// A removal that lands while a resume's partial is being prepared (on the work queue, after
    /// the removal deleted the file, before the preparation opens it again): the file the
    /// preparation creates goes too, not left behind as an orphan.
    @Test func aPartialPreparedAgainAfterItsDownloadWasRemovedIsDeleted() async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: driver)
        let r = try await Self.transferring(engine, driver)
        let id = r.snapshot.id
        guard case .paused = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: id) else {
            Issue.record("not paused")
            return
        }
        let partial = root.appendingPathComponent("state/partials/\(id).part").path
        #expect(FileManager.default.fileExists(atPath: partial))
        let removed = Mutex(false)
        let hookEnded = DispatchSemaphore(value: 0)
        engine.core.locked {
            engine.core.hooks.beforePrepare = {
                removed.withLock { $0 = engine.remove(id: id) != nil }
                let deadline = Date().addingTimeInterval(30)  // The removal deletes the file on the work queue.
                while FileManager.default.fileExists(atPath: partial) && Date() < deadline { usleep(2_000) }
                if FileManager.default.fileExists(atPath: partial) { removed.withLock { $0 = false } }
                hookEnded.signal()
            }
        }
        _ = try engine.request(DownloadRequest(url: "http://o.test/a"))
        // The preparation, then what its end queued (closing the stale attempt's partial); the
        // barriers only once the removal's deletion was queued (a barrier before it would hold it).
        try await onThread {
            #expect(hookEnded.wait(timeout: .now() + 40) == .success)
            engine.core.workQueue.sync(flags: .barrier) {}
            engine.core.workQueue.sync(flags: .barrier) {}
        }
        #expect(removed.withLock { $0 }, "removed, and its file deleted, before the preparation opened it")
        #expect(engine.snapshot(id: id) == nil && driver.startCount == 1)
        // (Effects may run on another deciding thread, after the barriers: bounded.)
        let deadline = Date().addingTimeInterval(10)
        while FileManager.default.fileExists(atPath: partial) && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!FileManager.default.fileExists(atPath: partial), "no orphan partial")
        await engine.shutdown()
    }

    @Test func removeStopsEverythingAndALaterRequestStartsAfresh() async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: driver)
        let r = try await Self.transferring(engine, driver)
        let id = r.snapshot.id
        let sub = try #require(engine.subscribe(id: id))
        let partial = root.appendingPathComponent("state/partials/\(id).part").path
        #expect(FileStore.fileSize(partial) != nil)
        #expect(engine.remove(id: id)?.id == id)
        guard case .removed(let by, let last) = try await Self.next(sub, where: { $0.isTerminal }) else {
            Issue.record("no removed event"); return
        }
        #expect(by == .operator && last.id == id)
        #expect(last.pausedBy == nil, "removed, not paused")
        #expect(driver.transfer(0).isCancelled)
        #expect(engine.snapshot(id: id) == nil && engine.subscribe(id: id) == nil)
        #expect(engine.liveTokens(among: [r.token]).isEmpty && engine.cancel(token: r.token) == nil)
        try await withTimeout(20) { while FileStore.fileSize(partial) != nil { try await Task.sleep(nanoseconds: 10_000_000) } }
        let again = try engine.request(DownloadRequest(url: "http://o.test/a"))
        #expect(again.snapshot.id != id && !again.coalesced)
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("Range") == nil)
        // The abandoned attempt ends afterwards: nothing of it comes back.
        driver.transfer(0).finish()
        try await Self.workQueueDrained(engine)
        #expect(engine.snapshot(id: id) == nil)
        #expect(engine.snapshot(id: again.snapshot.id)?.state == .downloading, "nor touches the new download")
    }

    @Test func removingACompletedFileDeletesItAndReadersOfItKeepTheirDescriptor() async throws {
        let body = EngineFixture.body(5000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "5000"], body: body) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (r, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f"), until: [.completed])
        let file = try #require(engine.completedFile(id: r.snapshot.id))
        let handle = try #require(FileHandle(forReadingAtPath: file.path))
        defer { try? handle.close() }
        #expect(engine.remove(id: r.snapshot.id) != nil)
        try await withTimeout(20) { while FileStore.fileSize(file.path) != nil { try await Task.sleep(nanoseconds: 10_000_000) } }
        #expect(try handle.readToEnd().map(Array.init) == body)
        #expect(engine.completedFile(id: r.snapshot.id) == nil)
    }

    @Test func holdAndTombstoneSurviveARestart() async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        let first = try EngineFixture.engine(root, driver: driver)
        let held = try await Self.transferring(first, driver, url: "http://o.test/held")
        let gone = try await Self.transferring(first, driver, url: "http://o.test/gone", attempt: 1)
        _ = first.operatorPause(id: held.snapshot.id)
        _ = first.remove(id: gone.snapshot.id)
        await first.shutdown()
        let second = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let restored = try #require(second.snapshot(id: held.snapshot.id))
        #expect(restored.state == .paused && restored.pausedBy == .operator)
        #expect(second.snapshot(id: gone.snapshot.id) == nil)
        #expect(second.core.locked { second.core.tombstones[gone.snapshot.id]?.by } == .operator)
        // Still held against a caller after the restart.
        let again = try second.request(DownloadRequest(url: "http://o.test/held"))
        #expect(again.snapshot.id == held.snapshot.id && again.snapshot.state == .paused)
        await second.shutdown()
    }

    /// A stored row a tombstone names (as a crash between the two could never leave, but a bug or an
    /// old backup might) is dropped at start-up, and the files the tombstone lists are deleted.
    @Test func aTombstoneBuriesItsRowAndFilesAtStartUp() async throws {
        let root = EngineFixture.root()
        let first = try EngineFixture.engine(root, driver: FakeTransferDriver())
        await first.shutdown()
        let state = root.appendingPathComponent("state").path
        let store = try SQLiteStateStore.open(directory: state).store
        let leftover = root.appendingPathComponent("cache/abc-left.bin").path
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data([1, 2, 3])))
        let now = Date()
        try store.commit(StateBatch(upserts: [StoredDownload(id: "abc", url: "http://o.test/x", storage: .cache, state: .paused,
                                                             verifiedOffset: 0, createdAt: now, updatedAt: now, lastAccess: now)]))
        try store.commit(StateBatch(tombstones: [Tombstone(id: "abc", url: "http://o.test/x", removedAt: now, by: .operator,
                                                           paths: [leftover])]))
        let second = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(second.snapshot(id: "abc") == nil)
        #expect(FileStore.fileSize(leftover) == nil)
        await second.shutdown()
        #expect(try SQLiteStateStore.open(directory: state).store.load().isEmpty)
    }
}
