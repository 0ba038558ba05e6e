import Foundation
import Testing
@testable import DownloaderEngine

/// A wall clock stepped forward while the service runs (NTP correcting a host that booted behind,
/// `date -s`) ages nothing: ages that decide a purge or close a safety window run on
/// `AgeingClock`, the wall clock held to the monotonic time since the engine started.
@Suite struct EngineClockStepTests {
    @Test func theAgeingClockIsTheWallClockHeldToTheMonotonicTimeSinceTheStart() {
        let clock = ManualScheduler()
        let ageing = AgeingClock(clock)
        let start = clock.now()
        #expect(ageing.now(clock) == start)
        clock.advance(10)
        #expect(ageing.now(clock) == start.addingTimeInterval(10), "no step: the wall clock")
        clock.stepWall(86_400)
        #expect(ageing.now(clock) == start.addingTimeInterval(10), "a step forward: held to the monotonic time")
        clock.advance(5)
        #expect(ageing.now(clock) == start.addingTimeInterval(15))
        clock.stepWall(-86_400 - 3600)
        #expect(ageing.now(clock) == start.addingTimeInterval(15 - 3600), "a step back: the wall clock (ages only shrink)")
        // Pure: a reading before the anchor never moves it back.
        #expect(ageing.now(wall: start.addingTimeInterval(50), sinceBoot: ageing.startSinceBoot - 5) == start)
    }

    /// A machine suspended for a night: the wall clock and the time since boot moved on, the
    /// monotonic clock did not. That night counts in ages (it is no step).
    @Test func aSuspendedNightCountsInAges() {
        struct Suspending: EngineClock {
            var wall: Double, monotonicSeconds: Double, boot: Double
            func monotonic() -> Double { monotonicSeconds }
            func now() -> Date { Date(timeIntervalSince1970: wall) }
            func sinceBoot() -> Double { boot }
        }
        var clock = Suspending(wall: 1_800_000_000, monotonicSeconds: 100, boot: 100)
        let ageing = AgeingClock(clock)
        (clock.wall, clock.boot) = (clock.wall + 36_000, clock.boot + 36_000)
        #expect(ageing.now(clock) == clock.now())
        let monotonic = SystemClock().monotonic()
        #expect(SystemClock().sinceBoot() >= monotonic, "CLOCK_BOOTTIME counts what CLOCK_MONOTONIC does, and suspends")
    }

    @Test func aCacheFileAndTheChangedWindowOutliveAForwardStep() async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "10"], body: EngineFixture.body(10)) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.cacheTTL = 100 }
        let id = try engine.request(DownloadRequest(url: "http://o.test/c")).snapshot.id
        try await withTimeout(20) {
            while engine.snapshot(id: id)?.state != .completed { try await Task.sleep(nanoseconds: 5_000_000) }
        }
        engine.core.locked { engine.core.byID[id]?.changedAt = clock.now() }
        clock.stepWall(86_400)
        clock.advance(50)  // Retention looks every 5 s.
        #expect(engine.snapshot(id: id)?.state == .completed, "50 s old, not a day")
        #expect(engine.changed(id: id, within: 600), "changed 50 s ago")
        clock.advance(60)
        #expect(engine.snapshot(id: id) == nil, "110 s without a request: purged")
        await engine.shutdown()
    }

    @Test func aPausedPartialOutlivesAForwardStep() async throws {
        let s = try EnginePressureTests.Setup { $0.pausedTTL = 100 }
        let paused = try await s.partial("x", kept: 8000)
        s.clock.stepWall(86_400)
        s.monitor.fire()
        #expect(s.kept(paused) == 8000, "paused a second ago, not a day")
        s.clock.advance(100)
        s.monitor.fire()
        #expect(s.summary(try await s.log.wait(for: 1)) == ["paused_partial:ttl:\(paused)"])
        await s.engine.shutdown()
    }

    @Test func aFailureOutlivesAForwardStep() async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver { _, _ in .init(status: 404, headers: [:], body: []) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.failedRetention = 100 }
        func failed(_ name: String) async throws -> String {
            let (r, s) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/\(name)"), until: [.failed])
            #expect(s.state == .failed)
            return r.snapshot.id
        }
        let first = try await failed("a")
        clock.stepWall(86_400)
        _ = try await failed("b")  // Each failure forgets the failures older than the retention.
        #expect(engine.snapshot(id: first)?.state == .failed, "failed a moment ago, not a day")
        clock.advance(101)
        _ = try await failed("c")
        #expect(engine.snapshot(id: first) == nil)
        await engine.shutdown()
    }
}
