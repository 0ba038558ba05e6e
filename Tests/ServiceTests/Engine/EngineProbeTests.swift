import Foundation
import Testing
@testable import DownloaderEngine

/// `HEAD` probes to origins (`DownloadEngine.probe`): bounded engine-wide, and a cancelled task
/// ends its probe's transfer (its place is free again).
@Suite(.timeLimit(.minutes(1)))
struct EngineProbeTests {
    @Test func probesAreBoundedAndACancelledOneEndsItsTransfer() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxConcurrentProbes = 2 }
        let first = Task { try await engine.probe(DownloadRequest(url: "http://o.test/a")) }
        let second = Task { try await engine.probe(DownloadRequest(url: "http://o.test/b")) }
        try await withTimeout(20) { await driver.waitForStarts(2) }
        await #expect(throws: EngineError.busy("")) { try await engine.probe(DownloadRequest(url: "http://o.test/c")) }
        first.cancel()
        _ = await first.result
        #expect(driver.transfer(0).isCancelled || driver.transfer(1).isCancelled)
        let third = Task { try await engine.probe(DownloadRequest(url: "http://o.test/d")) }
        try await withTimeout(20) { await driver.waitForStarts(3) }
        second.cancel()
        third.cancel()
        _ = await (second.result, third.result)
        await engine.shutdown()
    }
}
