import DownloaderEngine
import Foundation
import MiniHTTPServer
import Testing
@testable import DownloadService

/// A progress stream served by the real server: the keep-alive comment comes from the server's
/// idle heartbeat (no task of the stream's), and only once the stream has been quiet.
@Suite struct ProgressStreamKeepAliveLiveTests {
    @Test func idleProgressStreamGetsKeepAliveCommentsFromTheServer() async throws {
        let origin = try TestOrigin(bodySize: 1 << 20)
        defer { origin.stop() }
        origin.inject(.stall(afterBodyBytes: 1024))  // and paused below: nothing happens after
        var configuration = EngineConfiguration(root: FileManager.default.temporaryDirectory
            .appendingPathComponent("ds-sse-live-\(UUID().uuidString)"))
        configuration.allowPrivateNetworks = true
        let engine = try DownloadEngine(configuration: configuration)
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil, keepAliveInterval: 0.05)
        let created = try engine.request(DownloadRequest(url: origin.url))
        let id = created.snapshot.id
        // The only caller leaves: the download pauses and stays quiet (no event until resumed).
        #expect(engine.cancel(token: created.token) != nil)
        try await withServer(handler: { request in await api.respond(to: request) }) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/downloads/\(id)/progress", "Last-Event-ID: 41\r\n"))
            let head = try await client.readResponseHead()
            #expect(head.status == 200)
            #expect(head.header("Content-Type") == "text/event-stream; charset=utf-8")
            // The snapshot first (perhaps a late `paused`), then, as nothing more happens,
            // keep-alive comments: wait for two (bounded by the client's
            // receive timeout and withServer's 30 s).
            var text = ""
            var comments = 0
            while comments < 2, let chunk = try await client.readChunk() {
                let piece = String(decoding: chunk, as: UTF8.self)
                if piece == ": keep-alive\n\n" { comments += 1 } else { text += piece }
            }
            #expect(comments == 2)
            #expect(text.hasPrefix("retry: 2000\nid: 42\nevent: progress\ndata: {"))
            client.close()
        }
        await engine.shutdown()
    }
}
