import Foundation
import Testing
@testable import DownloadService
@testable import DownloaderEngine

/// Flags, environment and metrics of the durability features (pure).
@Suite struct DurabilityConfigTests {
    private func run(_ args: [String], env: [String: String] = ["HOME": "/home/u"]) -> ServiceConfiguration? {
        guard case .run(let c) = CommandLineOptions.parse(arguments: args, environment: env) else { return nil }
        return c
    }

    @Test func defaultsMeetTheIssue() throws {
        let c = try #require(run([])).engineConfiguration
        #expect(c.checkpointInterval <= 1 && c.checkpointBytes <= 4 << 20)
        #expect(c.minFreeDiskBytes == 1 << 30 && c.pausedTTL == 86_400 && c.testCrashPoint == nil)
    }

    @Test func flagsAndEnvironment() throws {
        let c = try #require(run(["--checkpoint-interval", "0.5", "--checkpoint-bytes", "8M",
                                  "--min-free-disk-bytes=2G", "--paused-ttl", "3600"])).engineConfiguration
        #expect(c.checkpointInterval == 0.5 && c.checkpointBytes == 8 << 20)
        #expect(c.minFreeDiskBytes == 2 << 30 && c.pausedTTL == 3600)
        let e = try #require(run([], env: ["HOME": "/h", "DOWNLOAD_SERVICE_CHECKPOINT_BYTES": "1M",
                                           "DOWNLOAD_SERVICE_TEST_CRASH_POINT": "after-publish-rename"])).engineConfiguration
        #expect(e.checkpointBytes == 1 << 20 && e.testCrashPoint == .afterPublishRename)
        for bad in [["--checkpoint-interval", "0"], ["--checkpoint-bytes", "0"], ["--paused-ttl", "soon"]] {
            guard case .invalid = CommandLineOptions.parse(arguments: bad, environment: [:]) else {
                Issue.record("\(bad) accepted")
                continue
            }
        }
        #expect(!CommandLineOptions.usage.contains("crash"), "the crash point is never a flag")
    }

    @Test func purgeCountersAreRenderedForEveryKindAndReason() {
        var stats = EngineStatistics()
        stats.purges[PurgeCounterKey(kind: .pausedPartial, reason: .disk)] = 3
        stats.purges[PurgeCounterKey(kind: .cacheFile, reason: .cacheLimit)] = 2
        let text = ServiceMetrics.render(states: [:], engine: stats, eventWatchers: 0, http: .init())
        #expect(text.contains("# TYPE download_service_purged_total counter\n"))
        #expect(text.contains(#"download_service_purged_total{kind="paused_partial",reason="disk"} 3"#))
        #expect(text.contains(#"download_service_purged_total{kind="cache_file",reason="cache_limit"} 2"#))
        #expect(text.contains(#"download_service_purged_total{kind="paused_partial",reason="ttl"} 0"#))
        #expect(text.contains(#"download_service_purged_total{kind="paused_partial",reason="client_limit"} 0"#))
        #expect(text.components(separatedBy: "download_service_purged_total{").count - 1 == 10)  // 2 kinds × 5 reasons.
    }
}
