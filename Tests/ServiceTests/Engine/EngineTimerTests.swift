import Foundation
import Testing
@testable import DownloaderEngine

/// Every engine timer driven by a manual clock: retry backoff (and `Retry-After`), a stall retried
/// with a resume, the trailing progress, and the shutdown bound. Nothing here waits on real time
/// but for other threads to get to the point the test asserts on.
@Suite struct EngineTimerTests {
    struct Setup {
        let clock = ManualScheduler()
        let driver: FakeTransferDriver
        let engine: DownloadEngine

        /// Retry delays: full jitter at the middle (`unit` 0.5) of 2 s, 4 s, 8 s … capped at 60 s.
        init(maxAttempts: Int = 4, driver: FakeTransferDriver = FakeTransferDriver()) throws {
            var c = EngineFixture.configuration(EngineFixture.root())
            c.retryBaseDelay = 2
            c.retryMaxDelay = 60
            c.maxAttempts = maxAttempts
            engine = try DownloadEngine(configuration: c, driver: driver, scheduler: clock, random: FixedRandom(unit: 0.5),
                                        diskPressure: .disabled)
            self.driver = driver
        }

        func started(_ count: Int) async throws -> FakeTransfer {
            try await withTimeout(10) { await driver.waitForStarts(count) }
            return driver.transfer(count - 1)
        }

        /// Moves the clock to just before `delay` (nothing starts), then to it (the next attempt starts).
        func retriesAfter(_ delay: Double, starting attempt: Int) async throws -> FakeTransfer {
            try await withTimeout(10) { await clock.waitForTimer(dueIn: delay) }
            clock.advance(delay - 0.01)
            #expect(driver.startCount == attempt - 1, "no attempt before the delay")
            clock.advance(0.01)
            return try await started(attempt)
        }
    }

    @Test func retryWaitsForTheBackoffOfEachAttempt() async throws {
        let s = try Setup()
        _ = try s.engine.request(DownloadRequest(url: "http://o.test/a"))
        try await s.started(1).fail(.connection)
        try await s.retriesAfter(1, starting: 2).fail(.connectTimeout)
        try await s.retriesAfter(2, starting: 3).fail(.connection)
        let fourth = try await s.retriesAfter(4, starting: 4)
        #expect(fourth.respond(200, ["Content-Length": "3"]))
        try fourth.send([1, 2, 3])
        fourth.finish()
        #expect(try await EngineFixture.waitFor(s.engine, id: s.engine.list()[0].id, [.completed]).size == 3)
        #expect(s.engine.statistics.retries == 3)
    }

    @Test func retryAfterReplacesTheBackoff() async throws {
        let s = try Setup()
        _ = try s.engine.request(DownloadRequest(url: "http://o.test/a"))
        #expect(!(try await s.started(1).respond(503, ["Retry-After": "7"])))
        _ = try await s.retriesAfter(7, starting: 2)
    }

    @Test func theLastAttemptsFailureEndsTheDownload() async throws {
        let s = try Setup(maxAttempts: 2)
        let r = try s.engine.request(DownloadRequest(url: "http://o.test/a"))
        let sub = try #require(s.engine.subscribe(id: r.snapshot.id))
        try await s.started(1).fail(.connection, "reset by peer")
        try await s.retriesAfter(1, starting: 2).fail(.connection, "reset again")
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .failed(let failed) = events.last else { Issue.record("\(events)"); return }
        #expect(failed.error == DownloadFailure(code: .retriesExhausted, message: "gave up after 2 attempts: reset again"))
    }

    @Test func aTimeoutOnTheLastAttemptNamesItself() async throws {
        let s = try Setup(maxAttempts: 2)
        let r = try s.engine.request(DownloadRequest(url: "http://o.test/a"))
        let sub = try #require(s.engine.subscribe(id: r.snapshot.id))
        try await s.started(1).fail(.headTimeout, "no head within 30 s")
        try await s.retriesAfter(1, starting: 2).fail(.connectTimeout, "connecting took more than 10 s")
        let events = try await withTimeout(10) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .failed(let failed) = events.last else { Issue.record("\(events)"); return }
        #expect(failed.error == DownloadFailure(code: .connectTimeout, message: "gave up after 2 attempts: connecting took more than 10 s"))
    }

    @Test func aStallIsRetriedAsAResume() async throws {
        let s = try Setup()
        _ = try s.engine.request(DownloadRequest(url: "http://o.test/a"))
        let first = try await s.started(1)
        #expect(first.respond(200, ["Content-Length": "5000", "ETag": "\"s\""]))
        try first.send([UInt8](repeating: 9, count: 1200))
        first.fail(.stalled, "no data for 30 s")
        let second = try await s.retriesAfter(1, starting: 2)
        #expect(second.header("Range") == "bytes=1200-")
        #expect(second.header("If-Range") == "\"s\"")
    }

    @Test func trailingProgressTellsTheLastBytesOneIntervalLater() async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.progressInterval = 0.2 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        try await withTimeout(10) { await driver.waitForStarts(1) }
        let t = driver.transfer(0)
        #expect(t.respond(200, ["Content-Length": "10000"]))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        let first = try await withTimeout(10) { await EngineFixture.events(sub) { _ in true } }
        #expect(first.map(\.snapshot.bytesWritten) == [0])
        // Both writes fall inside one interval after the head; then the origin goes quiet.
        clock.advance(0.05)
        try t.send([UInt8](repeating: 1, count: 1000))
        clock.advance(0.05)
        try t.send([UInt8](repeating: 2, count: 1500))
        try await withTimeout(10) { await clock.waitForTimer(dueIn: 0.1) }
        #expect(sub.queue.pendingCount == 0, "nothing told within the interval")
        clock.advance(0.1)
        let trailing = try await withTimeout(10) { await EngineFixture.events(sub) { _ in true } }
        #expect(trailing.map(\.snapshot.bytesWritten) == [2500])
        t.fail(.blockedAddress)
    }

    /// An engine on a manual clock whose one download's transfer never reports back, shutting
    /// down: its 10 s bound is armed. Real-time bounds are generous: a loaded 2-core run of the
    /// whole suite kept the shutdown task from running for tens of seconds (its cooperative pool
    /// has two threads, and tests block them).
    static func shuttingDownOverAHangingTransfer() async throws
        -> (DownloadEngine, HangingDriver, ManualScheduler, id: String, ended: OneShot<Bool>) {
        let hanging = HangingDriver()
        let clock = ManualScheduler()
        let engine = try DownloadEngine(configuration: EngineFixture.configuration(EngineFixture.root()), driver: hanging,
                                        scheduler: clock, diskPressure: .disabled)
        let id = try engine.request(DownloadRequest(url: "http://o.test/a")).snapshot.id
        _ = try await withTimeout(60) { try await hanging.started.value() }
        let ended = OneShot<Bool>()
        Task {
            await engine.shutdown()
            ended.set(true)
        }
        try await withTimeout(60) { await clock.waitForTimer(dueIn: 10) }
        return (engine, hanging, clock, id, ended)
    }

    @Test func shutdownStopsWaitingForADriverThatNeverAnswersAfterTenSeconds() async throws {
        let (_, hanging, clock, _, ended) = try await Self.shuttingDownOverAHangingTransfer()
        _ = try await withTimeout(60) { try await hanging.cancelled.value() }
        clock.advance(9.9)
        #expect(ended.current == nil, "still waiting for the transfer to report back")
        clock.advance(0.1)
        _ = try await withTimeout(60) { try await ended.value() }
    }
}

extension EngineTimerTests {
    /// A download removed while the shutdown waits for its transfer no longer holds the shutdown
    /// back (before, only an attempt's settling looked again, and a removed download's settles
    /// find no record: the shutdown waited for its full bound).
    @Test func aDownloadRemovedDuringShutdownNoLongerHoldsItBack() async throws {
        let (engine, _, _, id, ended) = try await Self.shuttingDownOverAHangingTransfer()
        #expect(ended.current == nil, "waiting for the transfer to report back")
        #expect(engine.remove(id: id) != nil)
        _ = try await withTimeout(60) { try await ended.value() }
    }
}

/// A driver whose transfers never report back, not even when cancelled.
final class HangingDriver: TransferStarting, TransferHandle, @unchecked Sendable {
    let started = OneShot<Bool>()
    let cancelled = OneShot<Bool>()
    private let lock = NSLock()
    private var delegates: [TransferDelegate] = []

    func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle {
        lock.withLock { delegates.append(delegate) }
        started.set(true)
        return self
    }

    func cancel() { cancelled.set(true) }
}
