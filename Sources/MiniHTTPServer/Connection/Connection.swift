import CLinux
import Foundation

/// One accepted socket: reads and parses requests, runs the handler, writes responses.
/// Confined to its event loop's thread; `@unchecked Sendable` only so handler workers (which run on
/// that same loop as their preferred executor) can hand results back.
final class Connection: Selectable, @unchecked Sendable {
    let fd: Int32
    let loop: EventLoop
    /// Strong on purpose: a handler worker may outlive the server's bookkeeping of this connection.
    let server: ServerContext
    let remoteAddress: String
    /// Admitted beyond the connection limits (that refusal): it may ask for one of
    /// `answeredBeyondLimit`'s paths, once; anything else gets the refusal (loop thread).
    var beyondLimit: ConnectionCounts.Refusal?
    /// How long a connection beyond the limits may take to send its request (1 s).
    static let beyondLimitHeaderTimeout: UInt64 = 1_000_000_000
    /// Set once registered with the loop; timers are keyed by it.
    var registrationID: UInt32 = 0

    // @exclusivity(unchecked) on every var below: loop-thread only, no overlapping access, so each access skips the runtime exclusivity check (swift_beginAccess/endAccess).
    @exclusivity(unchecked)
    var machine = ConnectionStateMachine()
    /// Waiting on the client alone: for (the rest of) a request head, or, answered, for it to close.
    var waitsOnClient: Bool {
        if isClosed { return false }
        if lingering { return true }
        if case .awaitingHead = machine.state { return true }
        return false
    }
    @exclusivity(unchecked)
    var parser: RequestParser
    /// Unparsed input (an incomplete head or chunk line, or pipelined requests); empty when idle.
    @exclusivity(unchecked)
    var inbound: [UInt8] = []
    @exclusivity(unchecked)
    var current: RequestHead?
    @exclusivity(unchecked)
    var body: [UInt8] = []
    @exclusivity(unchecked)
    var chunkedDecoder: ChunkedDecoder?
    @exclusivity(unchecked)
    var writes: PendingWrites
    /// Edge-triggered epoll: the socket may hold unread bytes.
    @exclusivity(unchecked)
    var mayRead = true
    /// The last send would have blocked and no `EPOLLOUT` came since: another send before it comes
    /// can only fail the same way (`flushPush` skips it; the event flushes).
    @exclusivity(unchecked)
    var sendBlocked = false
    @exclusivity(unchecked)
    var isClosed = false
    /// Response sent and our side shut down; discarding input until the peer closes.
    @exclusivity(unchecked)
    var lingering = false
    /// Bytes a lingering close still reads and drops before it closes anyway (a client that keeps
    /// sending would otherwise hold the loop in `drainLingering` until its deadline).
    @exclusivity(unchecked)
    var lingerBudget = Connection.maxLingerBytes
    static let maxLingerBytes = 1 << 20
    /// The peer shut down its sending side (EPOLLRDHUP): an end-of-stream is waiting to be read.
    @exclusivity(unchecked)
    var peerHalfClosed = false {
        didSet { if peerHalfClosed { peerSide.shutDown() } }
    }
    /// What a handler of this connection's requests sees of `peerHalfClosed`.
    let peerSide = PeerSide()
    /// Empty lines ignored before the next request line (at most `emptyLinesIgnored`: more start
    /// a request, which the header timeout then bounds).
    @exclusivity(unchecked)
    var emptyLinesSkipped = 0
    static let emptyLinesIgnored = 8
    /// The connection stopped reading a request part-way (error response or timeout).
    @exclusivity(unchecked)
    var abandonedInput = false
    /// `process` is on the stack: a response finished synchronously must not re-enter it.
    @exclusivity(unchecked)
    var isProcessing = false

    // Timers.
    @exclusivity(unchecked)
    var deadline: UInt64?
    @exclusivity(unchecked)
    var scheduledDeadline: UInt64?
    @exclusivity(unchecked)
    var headStartedAt: UInt64 = 0
    @exclusivity(unchecked)
    var lastProgressAt: UInt64 = 0
    /// When the current request's head was complete and its body began.
    @exclusivity(unchecked)
    var bodyStartedAt: UInt64 = 0

    // The request in progress.
    @exclusivity(unchecked)
    var requestSequence: UInt64 = 0
    /// The handler worker answering this connection's request (its handler may be suspended).
    @exclusivity(unchecked)
    var servingWorker: HandlerWorker?
    /// The complete request for a handler worker to take (at most one: reading pauses meanwhile).
    @exclusivity(unchecked)
    var queuedRequest: PendingRequest?
    @exclusivity(unchecked)
    var response: ResponseProgress?
    /// The record `response` points to while a response is in progress (reused, see `reset`).
    let progressRecord = ResponseProgress(sequence: 0, method: "", path: "", status: 0, startedAt: 0, headBytes: 0,
                                          bodyBytes: 0, isStream: false, chunked: false, complete: true)
    @exclusivity(unchecked)
    var streamWaiter: CheckedContinuation<Void, Error>?
    /// The push-fed body being sent, if any.
    @exclusivity(unchecked)
    var push: PushStream?
    /// On a bulk loop: the context this connection returns to after its response (`returnHome`).
    @exclusivity(unchecked)
    var home: ServerContext?

    init(fd: Int32, remoteAddress: String, loop: EventLoop, server: ServerContext) {
        self.fd = fd
        self.loop = loop
        self.server = server
        self.remoteAddress = remoteAddress
        self.parser = RequestParser(limits: server.limits)
        self.writes = PendingWrites(highWatermark: server.configuration.writeHighWatermark,
                                    lowWatermark: server.configuration.writeLowWatermark)
        let now = loop.now
        headStartedAt = now
        lastProgressAt = now
    }

    // MARK: Events

    func handleEvent(_ events: UInt32) {
        if lingering {
            drainLingering()
            return
        }
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            close(because: events & EPOLLERR.rawValue != 0 ? "socket error (EPOLLERR)" : "the client hung up (EPOLLHUP)")
            return
        }
        if events & EPOLLOUT.rawValue != 0 { sendBlocked = false }
        if events & EPOLLOUT.rawValue != 0, !writes.isEmpty {
            flush()
            if isClosed { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 {
            mayRead = true
            if events & EPOLLRDHUP.rawValue != 0 { peerHalfClosed = true }
            if peerHalfClosed, response?.isStream == true {
                // A streaming client went away: nothing more will be read, stop the stream now.
                close(because: "the client closed its side (EPOLLRDHUP)")
                return
            }
            readAndProcess()
        }
    }

    func readAndProcess() {
        while mayRead && machine.wantsToRead && !isClosed {
            let buffer = loop.buffers.read
            let n: Int
            do {
                switch try Socket.read(fd, into: buffer) {
                case .wouldBlock:
                    mayRead = false
                    updateDeadline()
                    return
                case .processed(let count): n = count
                }
            } catch {
                close(because: "read failed: \(error)")
                return
            }
            if n == 0 {
                mayRead = false
                if machine.peerClosed() == .close { close(because: "the client closed the connection") }
                return
            }
            // A short read drained the socket (edge-triggered: new data brings a new event) unless
            // the peer already closed its side: then the end-of-stream is still to be read.
            if n < buffer.count && !peerHalfClosed { mayRead = false }
            let chunk = UnsafeBufferPointer(start: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: n)
            if inbound.isEmpty {
                let used = process(chunk)
                if used < n, !isClosed { inbound.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[used...])) }
            } else {
                inbound.append(contentsOf: chunk)
                processInbound()
            }
        }
        if !isClosed { updateDeadline() }
    }

    /// Parses whatever is buffered in `inbound`.
    func processInbound() {
        guard !inbound.isEmpty else { return }
        let input = inbound  // keeps the bytes alive even if processing replaces `inbound`
        let used = input.withUnsafeBufferPointer { process($0) }
        if isClosed || lingering { return }
        if used == input.count {
            inbound = []
        } else if used > 0 {
            inbound = Array(input[used...])
        }
    }

    /// Parses heads and bodies from `input` until more data is needed or a request is complete.
    /// Returns how many bytes were consumed.
    func process(_ input: UnsafeBufferPointer<UInt8>) -> Int {
        isProcessing = true
        defer { isProcessing = false }
        var used = 0
        while used < input.count && !isClosed {
            let rest = UnsafeBufferPointer(rebasing: input[used...])
            switch machine.state {
            case .awaitingHead(let started):
                if !started {
                    // Empty lines before a request line (a CRLF some clients send after a body) are
                    // ignored (RFC 9112 §2.2) and start no request: an idle connection stays idle.
                    let skipped = RequestParser.emptyLines(rest, upTo: 2 * (Self.emptyLinesIgnored - emptyLinesSkipped))
                    if skipped > 0 {
                        emptyLinesSkipped += skipped / 2
                        used += skipped
                        continue
                    }
                    headStartedAt = loop.now
                    machine.bytesReceived()
                }
                switch parser.parse(rest) {
                case .needMoreData:
                    return used
                case .invalid(let failure):
                    fail(failure)
                    return input.count
                case .head(let head, let consumed):
                    used += consumed
                    emptyLinesSkipped = 0
                    parser.reset()
                    requestSequence &+= 1
                    let framing = head.framing, expectsContinue = head.expectsContinue
                    let keepAlive = head.keepAlive && beyondLimit == nil
                    if let refusal = beyondLimit, !server.configuration.answeredBeyondLimit.contains(pathOf(head.target)) {
                        current = consume head
                        refuseBeyondLimit(refusal)
                        return input.count
                    }
                    current = consume head
                    body = []
                    chunkedDecoder = framing == .chunked ? ChunkedDecoder(maxBodyBytes: server.limits.maxBodyBytes,
                                                                        maxTrailerBytes: server.limits.maxHeaderBytes) : nil
                    let hasBody = framing != .none
                    switch machine.headReceived(keepAlive: keepAlive, hasBody: hasBody) {
                    case .startHandler:
                        startHandler()
                        continue  // answered synchronously? then the next pipelined request follows
                    case .continueReading:
                        lastProgressAt = loop.now
                        bodyStartedAt = loop.now
                        if expectsContinue && used == input.count { writes.append(ResponseHeadEncoder.continueResponse); flush() }
                        // The declared length, up to 64 KiB: a head alone reserves no more (the
                        // body grows as its bytes arrive, up to `maxBodyBytes`).
                        if case .length(let n) = framing { body.reserveCapacity(min(n, 64 * 1024)) }
                    default:
                        close()
                        return input.count
                    }
                }
            case .readingBody:
                lastProgressAt = loop.now
                guard let framing = current?.framing else { close(); return input.count }
                var complete = false
                if case .length(let length) = framing {
                    let take = min(length - body.count, rest.count)
                    body.append(contentsOf: UnsafeBufferPointer(rebasing: rest[..<take]))
                    used += take
                    complete = body.count == length
                } else if var decoder = chunkedDecoder {
                    let result = decoder.feed(rest, into: &body)
                    chunkedDecoder = decoder
                    switch result {
                    case .needMoreData(let consumed):
                        used += consumed
                        return used
                    case .done(let consumed):
                        used += consumed
                        complete = true
                    case .invalid(let failure):
                        fail(failure)
                        return input.count
                    }
                }
                if complete {
                    if machine.bodyReceived() == .startHandler { startHandler() }
                    continue
                }
            case .responding, .closed:
                return used
            }
        }
        return used
    }

    /// A request beyond the connection limits for a path that is no probe: the limit's `503`, then close.
    func refuseBeyondLimit(_ refusal: ConnectionCounts.Refusal) {
        answerAndClose(status: 503) { status in
            var response = server.errorResponse(ServerError(status: status, kind: .tooManyConnections, reason: ConnectionLimiter.reason(refusal)))
            if response.headers["Retry-After"] == nil { response.headers["Retry-After"] = "1" }
            return response
        }
    }

    /// Answers a protocol error (rendered by the application) with `Connection: close`.
    func fail(_ failure: ParseFailure) {
        answerAndClose(status: failure.status) { status in
            server.errorResponse(ServerError(status: status, kind: .invalidRequest, reason: failure.reason))
        }
    }

    /// The server's own answer to the request being read (what it sent since is dropped), then
    /// close; `response` renders it for the status the state machine settles on.
    private func answerAndClose(status: Int, _ response: (Int) -> Response) {
        guard case .sendErrorAndClose(let status) = machine.parseFailed(status: status) else {
            close()
            return
        }
        inbound = []
        mayRead = false
        abandonedInput = true
        beginResponse(response(status), method: current?.method ?? "-", path: current.map { pathOf($0.target) } ?? "-", minor: 1,
                      requestHeaders: HTTPHeaders(), sequence: requestSequence, startedAt: headStartedAt)
    }

}

/// A complete request waiting for a handler worker.
struct PendingRequest: Sendable {
    var head: RequestHead
    var sequence: UInt64
    var startedAt: UInt64
}

/// Thrown by a stream writer once the client is gone or the connection closed.
struct ConnectionClosedError: Error, CustomStringConvertible {
    var description: String { "the client connection is closed" }
}

@inline(__always)
func nanoseconds(_ seconds: Double) -> UInt64 { UInt64(max(0, seconds) * 1_000_000_000) }

func pathOf(_ target: String) -> String {
    if let q = target.firstIndex(of: "?") { return String(target[..<q]) }
    return target
}
