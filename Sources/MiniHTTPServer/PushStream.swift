import Foundation
import Glibc
import Synchronization

/// A response body the event loop drives and the application feeds, from any thread, with no task
/// per stream: the loop asks the `source` for more whenever the connection can take it (after the
/// head went out, after `PushStream.wake()`, and when queued output drained below the low
/// watermark after being above the high one). Bytes are copied into the connection's queue; file
/// ranges are sent with `sendfile` from a `ReadableFile` (a file still growing can be tailed: queue
/// each new range as it lands; contiguous ranges of one file merge into one queue entry).
public struct PushBody: Sendable {
    /// `Content-Length` framing when known (exactly that many bytes, else the response is aborted);
    /// otherwise chunked on HTTP/1.1 and close-delimited on HTTP/1.0.
    public var length: Int64?
    public var source: any PushSource

    public init(length: Int64? = nil, source: any PushSource) {
        self.length = length
        self.source = source
    }
}

/// Feeds a `PushBody`. Both calls come on the connection's event-loop thread.
public protocol PushSource: AnyObject, Sendable {
    /// The connection can take more: write, send file ranges, finish or abort — or nothing, and
    /// `wake()` the stream once there is something.
    func produce(_ stream: PushStream)
    /// The response is over: `completed` when every byte went out after `finish()`; false when it was
    /// aborted, the client left, or the server shut down. Called once (also for a HEAD answer, which
    /// has no body to feed).
    func ended(_ stream: PushStream, completed: Bool)
    /// The server began shutting down while this body is being sent (on the loop): a body that
    /// can no longer complete should `abort` now rather than hold the shutdown for its whole grace
    /// period. Default: nothing (it is aborted when the grace period ends, if still open).
    func serverShuttingDown(_ stream: PushStream)
}

extension PushSource {
    public func serverShuttingDown(_ stream: PushStream) {}
}

/// An open file whose ranges a push stream sends; closed when the last user lets go.
public final class ReadableFile: Sendable {
    public let fd: Int32

    /// Takes ownership of `fd`.
    public init(fd: Int32) {
        self.fd = fd
    }

    /// Opens `path` read-only (no symlink followed at the last component).
    public static func open(_ path: String) -> ReadableFile? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        return fd >= 0 ? ReadableFile(fd: fd) : nil
    }

    deinit { Glibc.close(fd) }
}

/// One push-fed response body. `wake()` may be called from any thread; everything else only from
/// the connection's loop (inside `PushSource.produce`/`ended`, or code the loop runs: `loop.execute`
/// via `onLoop`).
public final class PushStream: @unchecked Sendable {
    weak var connection: Connection?
    let sequence: UInt64
    let loop: EventLoop
    /// Holds the source until the response ends (a source that keeps its stream drops it in `ended`).
    let source: any PushSource
    /// `Content-Length` of the body, when framed by length.
    public let length: Int64?
    let chunked: Bool
    /// Body bytes queued so far.
    public private(set) var queuedBytes: Int64 = 0
    /// `finish()` or `abort()` was called, or the connection closed.
    public private(set) var isEnded = false
    /// The source is to be called again once queued output drains below the low watermark.
    var awaitingDrain: Bool {
        get { drainAwaited.load(ordering: .relaxed) }
        set { drainAwaited.store(newValue, ordering: .releasing) }
    }
    private let drainAwaited = Atomic<Bool>(false)
    /// `produce` is on the stack (no re-entry).
    var producing = false
    /// `abortAfterQueued` was called: nothing more is queued, and the connection closes once what
    /// is queued went out (the access log's reason).
    private(set) var pendingAbort: String?
    private let wakeScheduled = Atomic<Bool>(false)

    init(connection: Connection, sequence: UInt64, source: any PushSource, length: Int64?, chunked: Bool) {
        self.connection = connection
        self.sequence = sequence
        self.loop = connection.loop
        self.source = source
        self.length = length
        self.chunked = chunked
    }

    /// Any thread: the source has something; the loop calls `produce` soon (calls coalesce).
    public func wake() {
        guard !wakeScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        loop.execute { [weak self] in
            guard let self else { return }
            self.wakeScheduled.store(false, ordering: .releasing)
            self.connection?.producePush(self)
        }
    }

    /// Any thread: the client is behind (queued output above the high watermark); the loop calls
    /// `produce` by itself once it drained below the low one. A source may skip a `wake()` that
    /// only says "more of the same" meanwhile (the next `produce` reads the newest state anyway);
    /// a change that must be acted on at once (abort) still wakes.
    public var isWaitingForClient: Bool { drainAwaited.load(ordering: .acquiring) }

    /// Any thread: runs `body` on the stream's loop (e.g. to read shared state the source keeps there).
    public func onLoop(_ body: @escaping @Sendable () -> Void) {
        loop.execute(body)
    }

    /// Queued output is below the high watermark: more can be queued without growing memory much
    /// (false once the stream ended or an abort is pending: nothing more can be queued).
    public var hasRoom: Bool {
        guard let connection = open else { return false }
        return !connection.writes.isAboveHighWatermark
    }

    /// The connection, while more can be queued on it (not ended, no abort pending, not closed).
    private var open: Connection? {
        guard !isEnded, pendingAbort == nil, let connection, !connection.isClosed else { return nil }
        return connection
    }

    /// Queues `bytes`.
    public func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, let connection = live(adding: Int64(bytes.count)) else { return }
        connection.writes.append(chunked ? ResponseHeadEncoder.chunk(bytes) : bytes)
        connection.flushPush()
    }

    /// Queues bytes `offset..<end` of `file` (sent with `sendfile`).
    public func send(_ file: ReadableFile, from offset: Int64, to end: Int64) {
        guard end > offset, let connection = live(adding: end - offset) else { return }
        if chunked { connection.writes.append(ResponseHeadEncoder.chunkHeader(Int(end - offset))) }
        connection.writes.appendSharedFile(file, offset: off_t(offset), end: off_t(end))
        if chunked { connection.writes.append(ResponseHeadEncoder.crlf) }
        connection.flushPush()
    }

    /// Ends the body after what is queued (a length-framed body that is short is aborted instead).
    public func finish() {
        guard let connection = open else { return }
        isEnded = true
        if let length, queuedBytes != length {
            connection.close(because: "the body ended after \(queuedBytes) of its \(length) bytes")
            return
        }
        connection.finishPush(self)
    }

    /// Ends the response abruptly: the connection closes, so the client sees a truncated body (no
    /// final chunk, or fewer bytes than `Content-Length`). `reason` goes to the access log.
    public func abort(_ reason: @autoclosure () -> String = "the body's source aborted it") {
        guard !isEnded else { return }
        isEnded = true
        connection?.close(because: reason())
    }

    /// Ends the response abruptly once what is already queued went out: the client gets those
    /// bytes, then a truncated body. Nothing more can be queued; `abort` still closes at once (say,
    /// when the queued ranges' file is about to change). Bounded by the server's write timeout.
    public func abortAfterQueued(_ reason: @autoclosure () -> String) {
        guard let connection = open else { return }
        pendingAbort = reason()
        connection.abortPushIfDrained(self)
    }

    /// Writes `bytes` whenever the stream has been quiet for `seconds` (chunked or close-delimited
    /// bodies only: a length-framed body has no room for them). Returns false when not possible.
    @discardableResult
    public func setIdleHeartbeat(_ bytes: [UInt8], after seconds: Double) -> Bool {
        guard length == nil, let connection else { return false }
        connection.scheduleHeartbeat(StreamHeartbeat(sequence: sequence, bytes: bytes,
                                                     interval: max(1_000_000, nanoseconds(seconds))),
                                     at: connection.loop.now &+ max(1_000_000, nanoseconds(seconds)))
        return true
    }

    /// Runs `body` on the loop after `seconds`, unless the stream has ended by then (a source's own
    /// patience: how long to wait for bytes, say). Loop thread.
    public func after(_ seconds: Double, _ body: @escaping @Sendable () -> Void) {
        guard let connection, !isEnded else { return }
        connection.loop.schedule(at: connection.loop.now &+ nanoseconds(seconds)) { [weak self] in
            guard let self, !self.isEnded, self.connection?.push === self else { return }
            body()
        }
    }

    /// Seconds on the loop's monotonic clock (for a source's own bookkeeping). Loop thread.
    public var loopSeconds: Double { Double(loop.now) / 1e9 }

    /// A response with no body to feed (HEAD, an empty body) starts ended.
    func markEnded() {
        isEnded = true
    }

    /// The connection, when `count` more body bytes may be queued (else the response is aborted).
    private func live(adding count: Int64) -> Connection? {
        guard let connection = open else { return nil }
        if let length, queuedBytes + count > length {
            abort("the body's source gave more than its \(length) bytes")
            return nil
        }
        queuedBytes += count
        connection.response?.bodyBytes += count
        return connection
    }
}
