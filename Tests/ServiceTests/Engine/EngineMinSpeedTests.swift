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
}
