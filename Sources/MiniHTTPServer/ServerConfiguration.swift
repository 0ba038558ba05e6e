import Foundation

/// Settings for `HTTPServer`. Every field has a documented default.
public struct ServerConfiguration: Sendable {
    /// Address to bind (default `127.0.0.1`).
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free port (default 8080).
    public var port: Int = 8080
    /// listen(2) backlog (default 1024).
    public var backlog: Int = 1024
    /// Event-loop threads (default: half the CPUs the process may use, at least 1: `CPUCount`, which
    /// heeds the affinity mask and a container's CPU quota). One loop accepts and hands
    /// each new connection round-robin to a loop, which then owns it (reads, writes, timers,
    /// handler tasks) until it closes. Values below 1 mean 1. Half, because the process has other
    /// work (transfers, hashing) and clients often share the machine: on 2 cores, two loops next to
    /// one busy client thread measured 0.7× the requests/s of one loop (context switches rose from
    /// ~0 to 0.22 per request; see BENCHMARKS.md).
    public var eventLoopCount: Int = ServerConfiguration.defaultEventLoopCount
    /// Longest request line accepted; longer gets 414 (default 8 KiB).
    public var maxRequestLineBytes: Int = 8 * 1024
    /// Largest header section accepted; larger gets 431 (default 64 KiB).
    public var maxHeaderBytes: Int = 64 * 1024
    /// Most header fields accepted; more gets 431 (default 100).
    public var maxHeaderCount: Int = 100
    /// Largest request body accepted; larger gets 413 (default 1 MiB).
    public var maxBodyBytes: Int = 1024 * 1024
    /// Seconds a client has to send a complete request head; then 408 and close (default 10).
    public var headerTimeout: Double = 10
    /// Seconds a client has to send a whole request body once its head arrived (default 60); within
    /// it, a pause of `headerTimeout` also ends the request (408 and close). So a body trickled a
    /// byte at a time cannot hold a connection for longer.
    public var bodyTimeout: Double = 60
    /// Seconds an idle keep-alive connection is kept open (default 60).
    public var idleTimeout: Double = 60
    /// Seconds a response may make no write progress before the connection is dropped (default 30).
    public var writeTimeout: Double = 30
    /// Pending output above which stream writers suspend and reading stops (default 256 KiB).
    public var writeHighWatermark: Int = 256 * 1024
    /// Pending output below which suspended writers resume (default 64 KiB).
    public var writeLowWatermark: Int = 64 * 1024
    /// Seconds in-flight requests get to finish on shutdown before streams are closed (default 10).
    public var shutdownGracePeriod: Double = 10
    /// Nice value of the event-loop threads (default 0: the process's own priority). Each loop
    /// thread lowers itself to it (`ThreadNice`, per thread: the process's other threads keep their
    /// priority), so on a saturated machine the application's other threads get the cores first and
    /// the loops (reads, writes, sendfile, handlers that do not hop elsewhere) take what is left,
    /// catching up once they are idle. Clamped to 0...19; only lowering (raising needs privilege).
    /// Threads a loop thread creates inherit the value.
    public var loopThreadNice: Int = 0
    /// Bulk loops (default 1; 0: none): extra event-loop threads that only write long response
    /// bodies made of bytes produced elsewhere, at `bulkLoopNice`. After the handler answered, a
    /// connection whose response is a push-fed body (`PushBody`: unknown length, or at least
    /// `bulkMinimumBodyBytes`) or a file body of at least `bulkMinimumBodyBytes` moves to a bulk
    /// loop (round-robin) for that response, then comes back to the loop it came from for its next
    /// request; accepting, parsing, handlers and short answers stay on the `eventLoopCount` loops.
    /// So the copies yield the cores to the application's other threads (the work they copy) and
    /// the short answers keep their priority.
    public var bulkLoopCount: Int = 1
    /// Nice value of the bulk loops (default 10), clamped to 0...19 like `loopThreadNice` (and never
    /// below it).
    public var bulkLoopNice: Int = 10
    /// The requests to give way the bulk loops follow (default nil: they never give way): while
    /// the application says its own work waits for a CPU, each keeps at most `share` of a core.
    public var bulkLoopYield: BulkLoopYield?
    /// Smallest file or length-framed push body that moves to a bulk loop (default 1 MiB).
    public var bulkMinimumBodyBytes: Int64 = 1 << 20
    /// Called with the server's own warnings: out of file descriptors (accepting pauses; said once
    /// until an accept succeeds again), a loop thread's priority that could not be set, a failed
    /// `epoll_wait`. Called on an event-loop thread, so it must not block: hand the line to a
    /// logger that queues (and drops when full). Default: a write to standard error.
    public var diagnostics: @Sendable (String) -> Void = ServerConfiguration.writeToStandardError
    /// The default `diagnostics`: one line on standard error (a blocking write).
    public static let writeToStandardError: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    /// Called once per finished request (for logs and metrics); nil logs nothing.
    public var accessLog: (@Sendable (AccessLogEntry) -> Void)?
    /// Renders the answers the server gives by itself (`ServerError`: a request it cannot read,
    /// a timeout, a handler that threw, too many connections, a `.file` body it cannot serve).
    /// The server adds framing, `Date` and `Connection` as for any response; only `.empty` and
    /// `.bytes` bodies are used (others are sent empty). Called on an event-loop thread, so it must
    /// not block; the two "too many connections" answers are rendered once, when the server starts.
    /// Default: `ServerError.plainText`, the reason as `text/plain`.
    public var errorRenderer: @Sendable (ServerError) -> Response = ServerError.plainText

    // MARK: Connection limits (security)

    /// Client connections open at once, all loops together (default 16 384). A connection accepted
    /// above it gets a canned `503` (`ServerError.Kind.tooManyConnections` as `errorRenderer`
    /// renders it, with `Retry-After: 1` and `Connection: close`) and is closed at once. Values
    /// below 1 mean 1. Keep it under the process's open-file limit (`OpenFileLimit.raiseToHardLimit()`).
    public var maxConnections: Int = 16_384
    /// Client connections open at once per client IP; nil means no per-IP limit (default nil).
    /// Above it the same `503` answers, naming the address as the reason.
    public var maxConnectionsPerIP: Int? = nil
    /// Paths answered even beyond `maxConnections` and `maxConnectionsPerIP` (health and readiness
    /// probes: a liveness probe refused at the limit would have the process killed): up to
    /// `probeConnectionsBeyondLimit` connections more are accepted, each for one request, and
    /// any other path on them gets the limit's `503` (default none). When all are taken, a newcomer
    /// takes the place of the oldest one waiting on its client alone (for its request, or to close).
    public var answeredBeyondLimit: Set<String> = []
    /// Connections beyond the limits kept for `answeredBeyondLimit` at once (default 16).
    public var probeConnectionsBeyondLimit: Int = 16

    public init() {}

    /// The CPUs the process may use (at least 1): online, within its affinity mask and its cgroup's quota.
    public static var usableCPUCount: Int { CPUCount.usable() }

    /// The default `eventLoopCount`: half the usable CPUs, at least 1.
    public static var defaultEventLoopCount: Int { max(1, usableCPUCount / 2) }
}

/// One finished request, as given to `ServerConfiguration.accessLog`.
public struct AccessLogEntry: Sendable {
    public var method: String
    public var path: String
    public var status: Int
    /// Body bytes written to the client.
    public var bytes: Int64
    public var durationSeconds: Double
    public var remoteAddress: String
    /// Why the connection closed before the response was all sent (a write timeout, a send error,
    /// the client leaving, the application aborting its body, ...); nil when it was sent whole.
    public var aborted: String?

    public init(method: String, path: String, status: Int, bytes: Int64, durationSeconds: Double, remoteAddress: String,
                aborted: String? = nil) {
        self.method = method
        self.path = path
        self.status = status
        self.bytes = bytes
        self.durationSeconds = durationSeconds
        self.remoteAddress = remoteAddress
        self.aborted = aborted
    }
}

extension ParserLimits {
    init(_ c: ServerConfiguration) {
        maxRequestLineBytes = c.maxRequestLineBytes
        maxHeaderBytes = c.maxHeaderBytes
        maxHeaderCount = c.maxHeaderCount
        maxBodyBytes = c.maxBodyBytes
    }
}
