import Foundation
import Testing
@testable import DownloaderEngine

/// A client's quota counts the tokens of its unfinished downloads; cancelling frees the place and
/// leaves a paused partial behind. Of those partials, one client keeps at most
/// `maxIdlePartialsPerClient`: beyond it its own oldest are purged at the next tick, nobody else's.
@Suite struct ClientPartialsBoundTests {
    @Test func aClientThatCancelsPastItsBoundLosesItsOwnOldestPartials() async throws {
        let s = try EnginePressureTests.Setup { $0.maxIdlePartialsPerClient = 2 }
        let first = try await s.partial("a1", kept: 1000, client: "A")
        let other = try await s.partial("o1", kept: 1000, client: "B")  // Older than A's next ones.
        let second = try await s.partial("a2", kept: 2000, client: "A")
        let running = try await s.partial("a3", kept: 3000, pause: false, client: "A")  // Still running: not idle.
        let third = try await s.partial("a4", kept: 4000, client: "A")
        s.monitor.fire()
        let events = try await s.log.wait(for: 1)
        #expect(s.summary(events) == ["paused_partial:client_limit:\(first)"])
        #expect(s.engine.snapshot(id: first)?.state == .paused && s.kept(first) == 0, "the download stays, paused without bytes")
        #expect(s.kept(second) == 2000 && s.kept(third) == 4000 && s.kept(other) == 1000)
        #expect(s.engine.snapshot(id: running)?.state == .downloading)
        // Within the bound now: the next tick purges nothing more.
        s.monitor.fire()
        _ = try await s.log.wait(for: 2, timeout: 0.5)
        #expect(s.log.all.count == 1, "\(s.summary(s.log.all))")
        await s.engine.shutdown()
    }

    /// The client is stored with the download: after a restart its partials are still its own.
    @Test func theBoundHoldsAfterARestart() async throws {
        let s = try EnginePressureTests.Setup()
        let first = try await s.partial("a1", kept: 1000, client: "A")
        let other = try await s.partial("o1", kept: 1000, client: "B")
        let second = try await s.partial("a2", kept: 2000, client: "A")
        await s.engine.shutdown()
        var c = EngineFixture.configuration(s.root)
        c.maxIdlePartialsPerClient = 1
        let next = try DownloadEngine(configuration: c, driver: FakeTransferDriver(), scheduler: s.clock,
                                      diskPressure: DiskPressure(minFreeBytes: 0, minFreeFraction: 0), pressure: s.monitor)
        let log = PurgeLog()
        next.onPurge { log.append($0) }
        s.monitor.fire()
        let events = try await log.wait(for: 1)
        #expect(s.summary(events) == ["paused_partial:client_limit:\(first)"])
        #expect(next.snapshot(id: second)?.bytesWritten == 2000 && next.snapshot(id: other)?.bytesWritten == 1000)
        await next.shutdown()
    }

    @Test func offByDefault() async throws {
        let s = try EnginePressureTests.Setup()
        var ids: [String] = []
        for n in 0..<3 { ids.append(try await s.partial("a\(n)", kept: 1000, client: "A")) }
        s.monitor.fire()
        _ = try await s.log.wait(for: 1, timeout: 0.5)
        #expect(s.log.all.isEmpty && ids.allSatisfy { s.kept($0) == 1000 })
        await s.engine.shutdown()
    }
}
