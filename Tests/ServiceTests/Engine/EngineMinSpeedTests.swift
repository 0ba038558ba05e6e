import Foundation
import Testing
@testable import DownloaderEngine

/// `--min-speed`: a connection that brings fewer bytes per second than the minimum over a whole
/// stall-timeout window is given up and the download resumes where it stood, as after a stall (a
/// trickle would otherwise hold its transfer slot for as long as it trickles).
@Suite(.timeLimit(.minutes(1)))
struct EngineMinSpeedTests {
    @Test func aConnectionSlowerThanTheMinimumReconnectsAndResumes() async throws {
        let origin = try TestOrigin(bodySize: 96 << 10)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 8 << 10 }  // 12 s for the whole body
        let engine = try EngineLiveTests.engine {
            $0.stallTimeout = 1
            $0.minSpeed = 64 << 10
            $0.retryBaseDelay = 0.05
            $0.maxAttempts = 3
        }
        let (_, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .failed && done.error?.code == .retriesExhausted, "\(String(describing: done.error))")
        #expect(done.error?.message.contains("slower than 65536 bytes/s for 1.0 s") == true, "\(String(describing: done.error))")
        let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
        #expect(gets.count == 3, "one connection per attempt")
        #expect(gets.dropFirst().allSatisfy { $0.header("Range") != nil && $0.header("If-Range") != nil }, "each resumed where it stood")
        #expect(done.bytesWritten < 96 << 10)
        await engine.shutdown()
    }

    /// The attempt after a stall (or a window too slow) opens a new connection (an HTTP/2 one
    /// outlives the stream that stalled, and would be used again); others may reuse one.
    @Test func theAttemptAfterAStallAsksForAFreshConnection() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.retryBaseDelay = 0 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/slow.bin"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(!driver.transfer(0).request.freshConnection)
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Content-Length": "4000"]))
        try driver.transfer(0).send(Array(repeating: 7, count: 1000))
        driver.transfer(0).fail(.stalled, "slower than 16384 bytes/s for 30 s (20 bytes/s)")
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).request.freshConnection)
        #expect(driver.transfer(1).range == "bytes=1000-")
        _ = engine.cancel(token: r.token)
        await engine.shutdown()
    }
}
