import Foundation
import Testing
@testable import DownloaderEngine

/// A download that goes back to the queue without a transfer (all slots busy) is told to its
/// watchers at once, as progress with the `queued` state: not minutes later when a slot frees.
@Suite struct QueuedNoticeTests {
    /// An engine with one transfer slot, held by a pending download of `/busy`.
    static func busyEngine() async throws -> (DownloadEngine, FakeTransferDriver) {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxConcurrentTransfers = 1 }
        _ = try engine.request(DownloadRequest(url: "http://o.test/busy"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        return (engine, driver)
    }

    /// The slot the busy download frees goes to another client's download before the third of a
    /// client that holds one already (`TransferSlots`), though that one waited longer.
    @Test func aFreedSlotGoesToTheClientHoldingTheFewest() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxConcurrentTransfers = 2 }
        for name in ["a1", "a2", "a3"] { _ = try engine.request(DownloadRequest(url: "http://o.test/\(name)", clientGroup: "A")) }
        _ = try engine.request(DownloadRequest(url: "http://o.test/b1", clientGroup: "B"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "1"]))
        try driver.transfer(0).send([1])
        driver.transfer(0).finish()
        try await withTimeout(20) { await driver.waitForStarts(3) }
        #expect(driver.transfer(2).request.url == "http://o.test/b1")
        await engine.shutdown()
    }

    @Test func aCallerJoiningAPausedDownloadIsToldQueued() async throws {
        let (engine, _) = try await Self.busyEngine()
        let first = try engine.request(DownloadRequest(url: "http://o.test/waiting"))
        #expect(first.snapshot.state == .queued)
        _ = engine.cancel(token: first.token)
        #expect(engine.snapshot(id: first.snapshot.id)?.state == .paused)
        let subscription = try #require(engine.subscribe(id: first.snapshot.id))
        _ = try engine.request(DownloadRequest(url: "http://o.test/waiting"))
        let told = try await withTimeout(20) {
            for await event in subscription {
                if case .progress(let s) = event, s.state == .queued { return s }
            }
            throw TimeoutError(seconds: 5)
        }
        #expect(told.id == first.snapshot.id && told.callers == 1)
        await engine.shutdown()
    }

    @Test func theOperatorsResumeIsToldQueued() async throws {
        let (engine, _) = try await Self.busyEngine()
        let waiting = try engine.request(DownloadRequest(url: "http://o.test/waiting"))
        guard case .done(let paused) = engine.operatorPause(id: waiting.snapshot.id) else { Issue.record("not paused"); return }
        #expect(paused.state == .paused)
        let subscription = try #require(engine.subscribe(id: waiting.snapshot.id))
        guard case .done(let resumed) = engine.operatorResume(id: waiting.snapshot.id) else { Issue.record("not resumed"); return }
        #expect(resumed.state == .queued)
        let told = try await withTimeout(20) {
            for await event in subscription {
                if case .progress(let s) = event, s.state == .queued { return s }
            }
            throw TimeoutError(seconds: 5)
        }
        #expect(told.pausedBy == nil)
        await engine.shutdown()
    }
}
