import Foundation

/// What a handler answers. The server adds `Content-Length` or chunked framing, `Date` and `Connection`.
public struct Response: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: ResponseBody

    public init(status: Int = 200, headers: HTTPHeaders = HTTPHeaders(), body: ResponseBody = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response from already-encoded bytes.
    public static func json(status: Int = 200, _ bytes: [UInt8], headers: HTTPHeaders = HTTPHeaders()) -> Response {
        var headers = headers
        headers["Content-Type"] = "application/json"
        return Response(status: status, headers: headers, body: .bytes(bytes))
    }
}

/// A response body: nothing, bytes, a file served with `sendfile`, or a stream written over time.
public enum ResponseBody: Sendable {
    case empty
    case bytes([UInt8])
    /// A file on disk. The server stats it and handles `ETag`, `Last-Modified`, `Accept-Ranges`,
    /// a single `Range` (206, or 416 when unsatisfiable), conditional requests and `HEAD`.
    case file(FileResponse)
    /// A body the closure writes over time (e.g. Server-Sent Events), sent chunked on HTTP/1.1.
    /// Each `write` is flushed at once. The server cancels the closure's task when the client goes
    /// away or the server shuts down; the response ends when the closure returns.
    case stream(@Sendable (any ResponseBodyWriter) async throws -> Void)
    /// A body the event loop drives and the application feeds from any thread, with no task per
    /// stream (`PushBody`): long-lived output such as event streams or a file that is still growing.
    case push(PushBody)
}

/// A file to serve as a response body.
public struct FileResponse: Sendable {
    public var path: String
    public var contentType: String
    /// A full `Content-Disposition` value, e.g. `attachment; filename="a.iso"`.
    public var contentDisposition: String?
    /// A strong ETag (with quotes) to use; when nil the server derives one from inode, size and mtime.
    public var etag: String?
    /// Other strong validators (with quotes) naming the same content: an `If-Range` with one of
    /// them is honoured like one with `etag`.
    public var alsoMatches: [String] = []
    /// Other strong dates naming the same content, as HTTP-dates (e.g. an origin's
    /// `Last-Modified`): an `If-Range` with one of them is honoured like one with the file's own.
    public var alsoModified: [String] = []
    /// Whether a symlink at `path` itself is followed (default true). When false the file is opened
    /// with `O_NOFOLLOW` and a symlink answers 404, so a link planted where the file should be never
    /// serves what it points at.
    public var followsSymlinks: Bool = true

    public init(path: String, contentType: String = "application/octet-stream", contentDisposition: String? = nil, etag: String? = nil) {
        self.path = path
        self.contentType = contentType
        self.contentDisposition = contentDisposition
        self.etag = etag
    }
}

/// Writes a streamed response body to the client.
public protocol ResponseBodyWriter: Sendable {
    /// Queues `bytes` and flushes them at once. Suspends while the connection's pending output is
    /// above its high watermark (a slow reader never grows memory without bound); throws once the
    /// client has gone or the connection was closed.
    func write(_ bytes: [UInt8]) async throws

    /// Asks for `bytes` (e.g. an SSE comment) to be written whenever nothing has reached the client
    /// for `seconds`, for as long as the stream lasts, without a task or timer of the caller's: the
    /// server checks its streams on its own timers and never writes while output is still queued
    /// (so a writer waiting for the client to drain is not disturbed). Call it at most once per
    /// stream. Returns false when this writer cannot do it (the caller must send heartbeats itself).
    func setIdleHeartbeat(_ bytes: [UInt8], after seconds: Double) -> Bool
}

extension ResponseBodyWriter {
    /// Writers that do not support heartbeats say so.
    public func setIdleHeartbeat(_ bytes: [UInt8], after seconds: Double) -> Bool { false }
}

/// The function that answers requests. A thrown error becomes a 500 for that request only (rendered
/// by `ServerConfiguration.errorRenderer`).
///
/// Handlers (and stream closures) start on the server's event-loop thread and stay there until they
/// suspend (e.g. by calling into an actor), which makes simple handlers cheap. So they must not block:
/// no `sleep`, no large synchronous disk or network I/O; move such work elsewhere (an actor, a
/// detached task, a dispatch queue) and `await` it. Cancellation means the client went away or the
/// server is shutting down.
public typealias HTTPHandler = nonisolated(nonsending) @Sendable (Request) async throws -> Response
