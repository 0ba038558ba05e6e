import Foundation
import Synchronization
@testable import MiniHTTPServer

/// Starts an `HTTPServer` on 127.0.0.1 port 0, runs `body` with its port, always shuts it down.
func withServer<T: Sendable>(
    configure: (inout ServerConfiguration) -> Void = { _ in },
    handler: @escaping HTTPHandler,
    _ body: @escaping @Sendable (Int) async throws -> T
) async throws -> T {
    var configuration = ServerConfiguration()
    configuration.host = "127.0.0.1"
    configuration.port = 0
    configuration.shutdownGracePeriod = 2
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, handler: handler)
    let port = try server.start()
    do {
        let result = try await withTimeout(30) { try await body(port) }
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

/// A one-shot signal tests await (bounded by `withTimeout` around them).
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }
}

/// Collects access-log entries and lets a test await them.
final class AccessLogRecorder: Sendable {
    let stream: AsyncStream<AccessLogEntry>
    private let continuation: AsyncStream<AccessLogEntry>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: AccessLogEntry.self)
    }

    var callback: @Sendable (AccessLogEntry) -> Void {
        { [continuation] in continuation.yield($0) }
    }

    func next(_ n: Int = 1) async -> [AccessLogEntry] {
        var out: [AccessLogEntry] = []
        for await entry in stream {
            out.append(entry)
            if out.count == n { break }
        }
        return out
    }
}

func get(_ path: String, _ extra: String = "") -> String {
    "GET \(path) HTTP/1.1\r\nHost: test\r\n\(extra)\r\n"
}

/// A temp directory unique to one test.
func makeTempDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("server-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
