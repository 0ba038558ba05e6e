import Foundation
import Testing
@testable import DownloaderEngine

/// A resume answered with another version (206 under a new ETag) drops the kept bytes: readers
/// (and `/fetch` requests that join during the backoff) no longer see the old version's
/// validator, length or bytes, but wait for the next version's head.
@Suite(.timeLimit(.minutes(1)))
struct FetchRestartDecisionTests {
    @Test func readersForgetTheDroppedVersionAtOnce() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let reader = try engine.attachReader(DownloadRequest(url: "http://o.test/changing.bin"))
        defer { reader.close() }
        try await withTimeout(5) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        try driver.transfer(0).send(EngineFixture.body(10_000))
        #expect(await eventually(within: 5) { reader.state.available == 10_000 })
        #expect(reader.state.validator == "\"v1\"")
        driver.transfer(0).fail(.connection, "reset")
        try await withTimeout(10) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("If-Range") == "\"v1\"")
        #expect(!driver.transfer(1).respond(206, ["Content-Range": "bytes 10000-39999/40000", "ETag": "\"v2\""]))
        #expect(await eventually(within: 5) { reader.state.validator == nil }, "\(reader.state)")
        #expect(reader.state.phase != .flowing && reader.state.total == nil && reader.state.available == 0)
    }
}
