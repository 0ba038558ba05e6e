import DownloaderEngine
import Foundation
import MiniHTTPServer
import Synchronization
import Testing
@testable import DownloadService

/// Collects what a stream response writes, and lets a test wait for a fragment.
private final class CollectingWriter: ResponseBodyWriter {
    private struct State {
        var text = ""
        var waiter: (fragment: String, continuation: CheckedContinuation<Void, Never>)?
    }

    private let state = Mutex(State())

    func write(_ bytes: [UInt8]) async throws {
        let ready = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.text += String(decoding: bytes, as: UTF8.self)
            guard let w = s.waiter, s.text.contains(w.fragment) else { return nil }
            s.waiter = nil
            return w.continuation
        }
        ready?.resume()
    }

    var received: String { state.withLock { $0.text } }

    /// Returns once `fragment` has been written, or when the waiting task is cancelled (so that
    /// `withTimeout` can bound it).
    func waitFor(_ fragment: String) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { s -> Bool in
                    if s.text.contains(fragment) || Task.isCancelled { return true }
                    s.waiter = (fragment, continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { s -> CheckedContinuation<Void, Never>? in
                defer { s.waiter = nil }
                return s.waiter?.continuation
            }?.resume()
        }
    }
}

@Suite struct ProgressStreamTests {
    /// The keep-alive comment arrives while a download is quiet; the stream ends when its task is
    /// cancelled (as the server does when the client goes away).
    @Test func keepAliveCommentsFlowWhileTheDownloadIsQuiet() async throws {
        let origin = try TestOrigin(bodySize: 1 << 20)
        defer { origin.stop() }
        origin.inject(.stall(afterBodyBytes: 1024))
        var configuration = EngineConfiguration(root: FileManager.default.temporaryDirectory
            .appendingPathComponent("ds-sse-\(UUID().uuidString)"))
        configuration.allowPrivateNetworks = true
        let engine = try DownloadEngine(configuration: configuration)
        let api = DownloadAPI(engine: engine, metrics: ServiceMetrics(), auth: nil, keepAliveInterval: 0.05)
        let created = try engine.request(DownloadRequest(url: origin.url))

        let response = api.progress(id: created.snapshot.id, request: Request(method: "GET", target: "/"))
        guard case .stream(let body) = response.body else {
            Issue.record("expected a stream body")
            return
        }
        let writer = CollectingWriter()
        let streaming = Task { try await body(writer) }
        // Generous: a starved cooperative pool (parallel tests on 2 cores) can delay the 50 ms sleep.
        try await withTimeout(30) { await writer.waitFor(": keep-alive\n\n") }
        streaming.cancel()
        _ = await streaming.result
        #expect(writer.received.hasPrefix("retry: 2000\nid: 1\nevent: progress\ndata: {"))
        await engine.shutdown()
    }

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
