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
        try await withTimeout(5) { await driver.waitForStarts(1) }
        return (engine, driver)
    }

    @Test func aCallerJoiningAPausedDownloadIsToldQueued() async throws {
        let (engine, _) = try await Self.busyEngine()
        let first = try engine.request(DownloadRequest(url: "http://o.test/waiting"))
        #expect(first.snapshot.state == .queued)
        _ = engine.cancel(token: first.token)
        #expect(engine.snapshot(id: first.snapshot.id)?.state == .paused)
        let subscription = try #require(engine.subscribe(id: first.snapshot.id))
        _ = try engine.request(DownloadRequest(url: "http://o.test/waiting"))
        let told = try await withTimeout(5) {
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
        let told = try await withTimeout(5) {
            for await event in subscription {
                if case .progress(let s) = event, s.state == .queued { return s }
            }
            throw TimeoutError(seconds: 5)
        }
        #expect(told.pausedBy == nil)
        await engine.shutdown()
    }
}
