/// The lifecycle of one HTTP/1.1 connection as a pure state machine: events in, actions out.
/// No I/O here; `Connection` performs the actions.
struct ConnectionStateMachine: Equatable {
    enum State: Equatable {
        /// Waiting for (the rest of) a request head. `started` once any byte of it arrived.
        case awaitingHead(started: Bool)
        case readingBody
        /// A handler runs or a response is being written; reading is paused (pipelining stays ordered).
        case responding
        case closed
    }

    /// Which timeout currently guards the connection.
    enum Deadline: Equatable {
        case idle, header, body, write
    }

    enum Action: Equatable {
        case none
        /// Keep parsing/reading.
        case continueReading
        /// Hand the complete request to the handler.
        case startHandler
        /// Answer with this error status, then close.
        case sendErrorAndClose(status: Int)
        /// Next request: parse what is buffered, then read.
        case resumeReading
        case close
    }

    private(set) var state: State = .awaitingHead(started: false)
    /// Whether the connection survives the response in progress.
    private(set) var keepAlive = true
    private(set) var requestsServed = 0
    private(set) var draining = false

    var wantsToRead: Bool {
        switch state {
        case .awaitingHead, .readingBody: true
        case .responding, .closed: false
        }
    }

    /// Bytes of a new request arrived.
    mutating func bytesReceived() {
        if case .awaitingHead(false) = state { state = .awaitingHead(started: true) }
    }

    mutating func headReceived(keepAlive requestKeepAlive: Bool, hasBody: Bool) -> Action {
        guard case .awaitingHead = state else { return .close }
        keepAlive = requestKeepAlive && !draining
        if hasBody {
            state = .readingBody
            return .continueReading
        }
        state = .responding
        return .startHandler
    }

    mutating func bodyReceived() -> Action {
        guard state == .readingBody else { return .close }
        state = .responding
        return .startHandler
    }

    /// The request could not be parsed (or was too large): answer and close.
    mutating func parseFailed(status: Int) -> Action {
        guard state != .closed, state != .responding else { return .close }
        keepAlive = false
        state = .responding
        return .sendErrorAndClose(status: status)
    }

    /// The response asked to close (e.g. `Connection: close`, close-delimited body).
    mutating func responseRequiresClose() { keepAlive = false }

    /// The last byte of the response left the buffer.
    mutating func responseSent() -> Action {
        guard state == .responding else { return .close }
        requestsServed += 1
        if keepAlive && !draining {
            state = .awaitingHead(started: false)
            return .resumeReading
        }
        state = .closed
        return .close
    }

    /// The peer closed its sending side (read returned 0).
    mutating func peerClosed() -> Action {
        switch state {
        case .responding:
            keepAlive = false
            return .none  // finish writing the response, then close
        case .closed:
            return .none
        default:
            state = .closed
            return .close
        }
    }

    /// The current deadline passed.
    mutating func timedOut() -> Action {
        switch state {
        case .awaitingHead(started: true), .readingBody:
            return parseFailed(status: 408)
        case .awaitingHead(started: false), .responding:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    /// The server stops: idle connections close now, busy ones after their response.
    mutating func shutdownRequested() -> Action {
        draining = true
        keepAlive = false
        if case .awaitingHead(started: false) = state {
            state = .closed
            return .close
        }
        return .none
    }

    mutating func closed() { state = .closed }

    /// Which timeout applies, given whether output is waiting to be written.
    func deadline(writesPending: Bool) -> Deadline? {
        switch state {
        case .awaitingHead(let started):
            return started || requestsServed == 0 ? .header : .idle
        case .readingBody:
            return .body
        case .responding:
            return writesPending ? .write : nil
        case .closed:
            return nil
        }
    }
}
