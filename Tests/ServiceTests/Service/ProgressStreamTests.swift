import DownloaderEngine
import Foundation
import MiniHTTPServer
import Testing
@testable import DownloadService

/// The progress route's answers outside a stream (the stream itself: `ProgressStreamKeepAliveLiveTests`
/// and the live service tests).
@Suite struct ProgressStreamTests {
    @Test func headAnswersWithoutSubscribing() async throws {
        let engine = try DownloadEngine(configuration: EngineConfiguration(root: FileManager.default.temporaryDirectory
            .appendingPathComponent("ds-sse-\(UUID().uuidString)")))
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil)
        let missing = api.progress(id: "nope", request: Request(method: "HEAD", target: "/"))
        #expect(missing.status == 404)
        #expect(engine.statistics.subscribers == 0)
        await engine.shutdown()
    }
}
