import Dispatch
import Foundation
import Glibc

/// An in-process HTTP/1.1 origin on 127.0.0.1 (port 0) for tests: plain blocking POSIX sockets and a
/// thread per connection, independent of `MiniHTTPServer`.
///
/// What it serves
/// - `path` (default `/file`, more via `addResource`) with a deterministic body of `bodySize` bytes
///   (`expectedBody(path:)` gives the exact bytes; each version and path has different bytes), with a
///   strong `ETag`, `Last-Modified`, `Date`, `Accept-Ranges: bytes` and `Content-Length`.
/// - `Range: bytes=N-`, `N-M` and `-S` answer 206 with `Content-Range`; past the end answers 416;
///   several ranges or bad syntax are ignored (200). `If-Range` follows RFC 9110 §13.1.5: an entity-tag
///   matches by strong comparison only (a weak one never matches), a date only when it equals the
///   current `Last-Modified`; a failed `If-Range` answers 200 with the whole current body.
/// - Keep-alive connections (HTTP/1.1 default), `HEAD`, 404 for unknown paths, 405 for other methods.
///
/// Switches (all thread-safe, settable while transfers run)
/// - `update { $0.… }` for `Settings`: validators (strong / weak ETag / ETag only / Last-Modified only /
///   none), `ignoreRanges` (always 200), `wrongContentRangeStart` (206 starting one byte off the
///   requested start), `bytesPerSecond` (throttle, so a cancel can land mid-body), `closeDelimited`
///   (no Content-Length; the body ends when the connection closes), `stallBound`, `headByteDelay`
///   (a slow head), `contentEncoding`, `contentDisposition`, `chunked`, `contentLengthDelta` (a
///   Content-Length that lies either way).
/// - `resizeKeepingValidators(path:size:)`: another size under the same validators;
///   `changeBytesKeepingValidators(path:)`: other bytes under them.
/// - `changeVersion(path:)`: a new body, a new ETag and a newer Last-Modified.
/// - `redirect(from:to:status:)`: a 3xx (302 by default) to another path; chains work (`/a`→`/b`→`/file`).
///   Redirect hops carry their own ETag/Last-Modified that must never be kept by a client.
/// - `inject(_:times:)`: faults for the next `times` requests to a resource path (redirect hops and
///   unknown paths do not consume them): `.cut(afterBodyBytes:)` closes the connection after K body
///   bytes, `.stall(afterBodyBytes:)` sends K bytes then nothing until the client goes (or
///   `stallBound` seconds pass), `.status(503, retryAfter: "2")` answers that status instead,
///   `.reset(afterBodyBytes:)` resets the connection (RST) after K bytes, and
///   `.changeVersion(afterBodyBytes:)` closes after K bytes having replaced the body by a new version.
///   `.cut` and `.reset` cut a 416 page short as well.
///   Faults queue up in order; `clearFaults()` drops the rest.
///
/// What it records
/// - `requests()` / `requests(path:)`: every request (method, path, headers in wire order, connection
///   number), so a test can assert the exact `Range`/`If-Range` each attempt sent.
/// - `getCount(path:)`: GETs per path; `connectionCount`: accepted connections; `bodyBytesSent`: body bytes served;
///   `cutCount`: responses a fault ended by closing or resetting the connection;
///   `waitForGETs(n, path:)` waits (bounded, no polling) until n GETs for a path arrived.
///
/// Bounds: 64 connections at once (more are closed at once), 64 KiB request heads, 10 s idle
/// receive timeout, stalls end after `stallBound`. Always call `stop()` (e.g. `defer`): it closes the
/// listener and every connection and waits (bounded) for the threads; until then the origin stays alive.
final class TestOrigin: Sendable {
    /// Which validators resource responses carry.
    enum Validators: Sendable, Equatable {
        /// Strong `ETag` and `Last-Modified` (the default).
        case strong
        /// `ETag: W/"…"` and `Last-Modified`.
        case weakETag
        /// A strong `ETag`, no `Last-Modified`.
        case etagOnly
        /// `Last-Modified` only.
        case lastModifiedOnly
        /// Neither.
        case none
    }

    /// A one-shot misbehaviour for one request to a resource path.
    enum Fault: Sendable, Equatable {
        /// Close the connection after `afterBodyBytes` bytes of the body.
        case cut(afterBodyBytes: Int)
        /// Send `afterBodyBytes` bytes, then nothing until the client goes or `stallBound` passes.
        case stall(afterBodyBytes: Int)
        /// Answer `status` (e.g. 404, 429, 500, 503) with an optional `Retry-After` value.
        case status(Int, retryAfter: String?)
        /// Send `afterBodyBytes` bytes, then reset the connection (RST: SO_LINGER 0, close).
        case reset(afterBodyBytes: Int)
        /// Send `afterBodyBytes` bytes, replace the resource by a new version (new bytes and ETag),
        /// then close: a resume with `If-Range` gets the whole new body.
        case changeVersion(afterBodyBytes: Int)
        /// Send `afterBodyBytes` bytes, change the resource's size to `size` keeping its validators
        /// (`resizeKeepingValidators`), then close.
        case resize(afterBodyBytes: Int, to: Int)
    }

    /// Behaviour switches; change them with `update`.
    struct Settings: Sendable {
        var validators: Validators = .strong
        /// Ignore `Range` and always answer 200 with the whole body.
        var ignoreRanges = false
        /// With `ignoreRanges`: still say `Accept-Ranges: bytes` (a server that claims ranges and
        /// answers them with the whole body).
        var advertiseIgnoredRanges = false
        /// Answer 206 with a range starting one byte before the requested start (after it for 0).
        var wrongContentRangeStart = false
        /// Answer a range with at most this many bytes (`206 bytes N-M/total`, M short of the end).
        var maxRangeLength: Int? = nil
        /// A `206` goes on this many bytes past the end its Content-Range names (use with `chunked`:
        /// no Content-Length stops it first).
        var rangeOverrun = 0
        /// Throttle bodies to about this many bytes per second; nil is unthrottled.
        var bytesPerSecond: Int? = nil
        /// Send no Content-Length and close the connection to end the body.
        var closeDelimited = false
        /// Longest a `.stall` fault holds the connection, in seconds.
        var stallBound: Double = 10
        /// Send response heads one byte at a time, this many seconds apart (a slow head).
        var headByteDelay: Double? = nil
        /// `Content-Encoding` sent with resource bodies (the bytes stay what they are), e.g. "gzip".
        var contentEncoding: String? = nil
        /// `Content-Disposition` sent with resource bodies.
        var contentDisposition: String? = nil
        /// `Content-Type` sent with resource bodies.
        var contentType = "application/octet-stream"
        /// Send resource bodies with `Transfer-Encoding: chunked` (no Content-Length).
        var chunked = false
        /// Announce this many bytes more (or, negative, fewer) than the body has, send the whole
        /// body anyway and close: a short body, or bytes after the announced end.
        var contentLengthDelta = 0
        /// Keep connections open even when the client asks for `Connection: close`.
        var ignoreConnectionClose = false
        /// Seconds a connection may stay idle between requests before the origin closes it.
        var idleTimeout = 10
    }

    /// Everything mutable, behind `state` (internal only for OriginConnection.swift).
    struct State: Sendable {
        var resources: [String: OriginResource] = [:]
        var redirects: [String: Redirect] = [:]
        var settings = Settings()
        var faults: [(fault: Fault, remaining: Int)] = []
        var requests: [RecordedRequest] = []
        var getCounts: [String: Int] = [:]
        var open: Set<Int32> = []
        var accepted = 0
        var bodyBytesSent: Int64 = 0
        var cuts = 0
        var stopped = false
        var waiters: [UUID: GETWaiter] = [:]
    }

    struct GETWaiter: Sendable {
        var path: String
        var count: Int
        var continuation: CheckedContinuation<Void, Error>
    }

    struct Redirect: Sendable {
        var to: String
        var status: Int
    }

    /// The port it listens on.
    let port: UInt16
    /// The address it listens on (127.0.0.1 unless told otherwise, e.g. "::1" or "127.0.0.2").
    let address: String
    /// The default resource's path.
    let path: String
    let listener: Int32
    let state: OriginLock<State>
    let threads = DispatchGroup()

    static let maxConnections = 64
    static let maxRecordedRequests = 10_000

    /// Starts listening at once on `address`:`port` (0: any free port); `bodySize` bytes are served at `path`.
    init(bodySize: Int = 1 << 20, path: String = "/file", settings: Settings = Settings(), address: String = "127.0.0.1",
         port: UInt16 = 0) throws {
        let (fd, port) = try OriginSocket.listen(on: address, port: port)
        self.listener = fd
        self.port = port
        self.address = address
        self.path = path
        var initial = State()
        initial.settings = settings
        initial.resources[path] = OriginResource(path: path, size: bodySize, version: 1)
        self.state = OriginLock(initial)
        threads.enter()
        Thread.detachNewThread { [self] in
            acceptLoop()
            threads.leave()
        }
    }

    // MARK: URLs and expected content

    /// `http://127.0.0.1:<port>` (or the address it listens on, IPv6 in brackets).
    var baseURL: String { "http://\(address.contains(":") ? "[\(address)]" : address):\(port)" }
    /// The default resource's URL.
    var url: String { baseURL + path }
    /// The URL of `path`.
    func url(_ path: String) -> String { baseURL + path }

    /// The exact body currently served at `path` (default: the default resource).
    func expectedBody(path: String? = nil) -> [UInt8] {
        let resource = state.withLock { $0.resources[path ?? self.path] }
        guard let resource else { return [] }
        return OriginBody.bytes(seed: resource.seed, range: 0..<resource.size)
    }

    /// The strong ETag of the current version at `path` as the origin would send it under `.strong`.
    func etag(path: String? = nil) -> String? { state.withLock { $0.resources[path ?? self.path]?.etag } }

    /// The Last-Modified of the current version at `path`.
    func lastModified(path: String? = nil) -> String? {
        state.withLock { $0.resources[path ?? self.path]?.lastModified }
    }

    // MARK: Switches

    /// Serves another deterministic body at `path`.
    func addResource(path: String, size: Int) {
        state.withLock { $0.resources[path] = OriginResource(path: path, size: size, version: 1) }
    }

    /// Changes the size of the body at `path` and nothing else: same bytes where the two overlap,
    /// same ETag and Last-Modified (an origin whose validators lie).
    func resizeKeepingValidators(path: String? = nil, size: Int) {
        state.withLock { $0.resources[path ?? self.path]?.size = size }
    }

    /// Other bytes at `path`, same size, same ETag and Last-Modified (an origin whose validators lie).
    func changeBytesKeepingValidators(path: String? = nil) {
        state.withLock { $0.resources[path ?? self.path]?.salt &+= 0x9E37_79B9_7F4A_7C15 }
    }

    /// Replaces the body at `path` by a new version (new bytes, new ETag, newer Last-Modified).
    func changeVersion(path: String? = nil) {
        state.withLock { $0.resources[path ?? self.path]?.version += 1 }
    }

    /// Answers requests for `from` with `status` and `Location: to` (a path on this origin, or any absolute
    /// URL, e.g. `ftp://…`, sent as given).
    func redirect(from: String, to: String, status: Int = 302) {
        state.withLock { $0.redirects[from] = Redirect(to: to, status: status) }
    }

    /// Changes the settings while running.
    func update(_ change: (inout Settings) -> Void) {
        state.withLock { change(&$0.settings) }
    }

    /// Queues `fault` for the next `times` requests to resource paths.
    func inject(_ fault: Fault, times: Int = 1) {
        guard times > 0 else { return }
        state.withLock { $0.faults.append((fault, times)) }
    }

    /// Drops every queued fault.
    func clearFaults() {
        state.withLock { $0.faults.removeAll() }
    }

    // MARK: Records

    /// Every request received so far, in arrival order (the last 10 000).
    func requests() -> [RecordedRequest] { state.withLock { $0.requests } }

    /// The requests for `path`.
    func requests(path: String) -> [RecordedRequest] { requests().filter { $0.path == path } }

    /// GET requests received for `path` (default: the default resource).
    func getCount(path: String? = nil) -> Int { state.withLock { $0.getCounts[path ?? self.path] ?? 0 } }

    /// Connections accepted so far.
    var connectionCount: Int { state.withLock { $0.accepted } }

    /// Resource body bytes handed to the kernel so far, every path and request together (what a
    /// client was served, whether or not it kept it).
    var bodyBytesSent: Int64 { state.withLock { $0.bodyBytesSent } }

    /// Responses a `.cut`, `.reset`, `.changeVersion` or `.resize` fault ended so far (closed or reset).
    var cutCount: Int { state.withLock { $0.cuts } }

    // MARK: Lifecycle

    /// Closes the listener and all connections, then waits up to 5 s for the origin's threads.
    func stop() {
        let first = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.stopped = true
            _ = shutdown(listener, Int32(SHUT_RDWR))
            for fd in state.open { _ = shutdown(fd, Int32(SHUT_RDWR)) }
            return true
        }
        if first { _ = threads.wait(timeout: .now() + 5) }
    }

    // MARK: Waiting

    /// Waits until at least `count` GETs for `path` (default: the default resource) arrived; throws
    /// `TimeoutError` after `timeout` seconds.
    func waitForGETs(_ count: Int, path: String? = nil, timeout: Double = 10) async throws {
        let path = path ?? self.path
        let id = UUID()
        try await withTimeout(timeout) { [self] in
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                    let outcome = state.withLock { state -> Result<Void, Error>? in
                        if (state.getCounts[path] ?? 0) >= count { return .success(()) }
                        if Task.isCancelled { return .failure(CancellationError()) }  // onCancel already ran.
                        state.waiters[id] = GETWaiter(path: path, count: count, continuation: continuation)
                        return nil
                    }
                    if let outcome { continuation.resume(with: outcome) }
                }
            } onCancel: {
                let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(throwing: CancellationError())
            }
        }
    }
}
