import Foundation
import Synchronization
@testable import MiniHTTPServer

/// Starts an `HTTPServer` on 127.0.0.1 port 0, runs `body` with its port (at most `timeout` seconds),
/// always shuts it down.
func withServer<T: Sendable>(
    timeout: Double = 30,
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
        let result = try await withTimeout(timeout) { try await body(port) }
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

/// A one-shot signal tests await. Every wait is bounded (a step that failed must not hang the
/// suite: a continuation nobody resumes outlives any `withTimeout`, whose group awaits it).
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, next: Int, waiters: [Int: CheckedContinuation<Bool, Never>])>((false, 0, [:]))

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.open = true
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume(returning: true) }
    }

    /// Waits until the gate opens, at most `timeout` seconds: whether it opened.
    @discardableResult
    func wait(timeout: Double = 30) async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let id: Int? = state.withLock { s in
                if s.open { return nil }
                defer { s.next += 1 }
                s.waiters[s.next] = c
                return s.next
            }
            guard let id else { return c.resume(returning: true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                if let waiter = state.withLock({ $0.waiters.removeValue(forKey: id) }) { waiter.resume(returning: false) }
            }
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
