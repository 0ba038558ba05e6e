import CLinux
import Foundation

extension Connection {
    /// Hands the complete request in `current` to the loop's handler workers (`HandlerWorkers`):
    /// the request waits in `queuedRequest` until a worker task takes it, so a batch of requests
    /// that became ready in one loop iteration costs one task resumption.
    func startHandler() {
        guard current != nil else { return }
        swap(&current!.request.body, &body)
        current!.request.remoteAddress = remoteAddress
        current!.request.peerSide = peerSide
        updateDeadline()
        queuedRequest = PendingRequest(head: current.take()!, sequence: requestSequence, startedAt: headStartedAt)
        server.workers.enqueue(self)
    }

    /// Runs the handler for the queued request and sends its response (and stream) on the loop.
    /// Called by a handler worker; a request handed over is served even if the client left
    /// meanwhile (the handler runs and the request still gets its access-log entry).
    /// `nonisolated(nonsending)` (like `HTTPHandler`) so calls stay on the worker's executor without
    /// an executor switch (each switch of a task with an executor preference takes its status lock).
    nonisolated(nonsending) func serveQueuedRequest() async {
        guard let pending = takeQueuedRequest() else { return }
        var response: Response
        do {
            response = try await server.handler(pending.head.request)
        } catch {
            response = server.errorResponse(ServerError(status: 500, kind: .handlerFailed, reason: "the request handler failed"))
        }
        if !loop.inEventLoop { await loop.hop() }
        if let stream = beginResponse(response, method: pending.head.request.method, path: pending.head.request.path,
                                      minor: pending.head.request.version.minor,
                                      requestHeaders: pending.head.request.headers,
                                      sequence: pending.sequence, startedAt: pending.startedAt) {
            await runStream(stream, sequence: pending.sequence)
        }
    }

    /// Moves the queued request out (a synchronous, specialised move: no generic Optional copy in
    /// the async caller).
    @inline(never)
    func takeQueuedRequest() -> PendingRequest? {
        queuedRequest.take()
    }

    /// Runs a stream body's closure, then ends the stream on the loop.
    private nonisolated(nonsending) func runStream(_ stream: @Sendable (any ResponseBodyWriter) async throws -> Void,
                                                  sequence: UInt64) async {
        var failed = false
        do {
            try await stream(StreamBodyWriter(connection: self, sequence: sequence))
        } catch {
            failed = true
        }
        if !loop.inEventLoop { await loop.hop() }
        endStream(sequence: sequence, failed: failed)
    }

    /// Queues the response head and body. Returns the stream closure when the body is a stream
    /// that should run now.
    @discardableResult
    func beginResponse(_ response: Response, method: String, path: String, minor: Int,
                       requestHeaders: HTTPHeaders, sequence: UInt64,
                       startedAt: UInt64,
                       prepared: FileServer.Prepared? = nil) -> (@Sendable (any ResponseBodyWriter) async throws -> Void)? {
        guard !isClosed, sequence == requestSequence, self.response == nil else {
            if isClosed, sequence == requestSequence, self.response == nil {
                // The client left before the handler answered: still one log entry for the request.
                logAccess(ResponseProgress(sequence: sequence, method: method, path: path, status: response.status,
                                           startedAt: startedAt, headBytes: 0, bodyBytes: 0, isStream: false,
                                           chunked: false, complete: true))
            }
            return nil
        }
        if let connection = response.headers["Connection"],
           connection.split(separator: ",").contains(where: { $0.trimmingSpaces().caseInsensitiveEquals("close") }) {
            machine.responseRequiresClose()
        }
        let isHead = method == "HEAD"
        if case .push(let body) = response.body,
           movesToBulk(.push(length: body.length), status: response.status, isHead: isHead) {
            moveToBulkLoop(MovedResponse(response: response, prepared: nil, method: method, path: path, minor: minor,
                                         requestHeaders: requestHeaders, sequence: sequence, startedAt: startedAt))
            return nil
        }
        var status = response.status
        var headers = response.headers
        var out: [UInt8] = []
        var bodyBytes: Int64 = 0
        var file: FileRange?
        var stream: (@Sendable (any ResponseBodyWriter) async throws -> Void)?
        var pushStart: PushStream?
        var chunked = false
        let framing: ResponseHeadEncoder.Framing
        switch response.body {
        case .empty, .bytes:
            var bytes: [UInt8] = []
            if case .bytes(let b) = response.body { bytes = b }
            if HTTPStatus.forbidsBody(status) {
                framing = .none
            } else {
                framing = .length(Int64(bytes.count))
                if !isHead { bodyBytes = Int64(bytes.count) }
            }
            // The head and body go straight into the loop's write buffer and out with one send.
            var raw = RawOutput(loop.buffers.write)
            ResponseHeadEncoder.encode(status: status, headers: headers, date: loop.dateHeader, framing: framing,
                                       keepAlive: machine.keepAlive, into: &raw)
            let rawHeadBytes = raw.count
            if bodyBytes > 0 { bytes.withUnsafeBufferPointer { raw.append(bytes: $0) } }
            if !raw.overflowed {
                self.response = progressRecord.reset(sequence: sequence, method: method, path: path, status: status,
                                                     startedAt: startedAt, headBytes: rawHeadBytes, bodyBytes: bodyBytes,
                                                     isStream: false, chunked: false, complete: true)
                writeNow(raw.bytes)
                return nil
            }
            // Larger than the write buffer: reuse the loop's scratch array (it comes back unique
            // when the send completed).
            out = loop.buffers.scratch
            loop.buffers.scratch = []
            out.removeAll(keepingCapacity: true)
            out.reserveCapacity(160 + headers.count * 40 + Int(bodyBytes))
            ResponseHeadEncoder.encode(status: status, headers: headers, date: loop.dateHeader, framing: framing,
                                       keepAlive: machine.keepAlive, into: &out)
            let headBytes = out.count
            if bodyBytes > 0 { out.append(contentsOf: bytes) }
            self.response = progressRecord.reset(sequence: sequence, method: method, path: path, status: status,
                                             startedAt: startedAt, headBytes: headBytes, bodyBytes: bodyBytes,
                                             isStream: false, chunked: false, complete: true)
            writeNow(out)
            if out.capacity <= 64 * 1024 { loop.buffers.scratch = out }
            return nil
        case .file(let fileResponse):
            let outcome = prepared.map { FileServer.Outcome.success($0) }
                ?? FileServer.prepare(fileResponse, method: method, requestHeaders: requestHeaders,
                                      renderError: server.errorResponse)
            if case .success(let planned) = outcome, let range = planned.range, planned.body == nil,
               movesToBulk(.file(bytes: Int64(range.end - range.start)), status: planned.status, isHead: isHead) {
                moveToBulkLoop(MovedResponse(response: response, prepared: planned, method: method, path: path,
                                             minor: minor, requestHeaders: requestHeaders, sequence: sequence,
                                             startedAt: startedAt))
                return nil
            }
            switch outcome {
            case .failure(let error):
                return beginResponse(server.errorResponse(error), method: method, path: path, minor: minor,
                                     requestHeaders: requestHeaders, sequence: sequence, startedAt: startedAt)
            case .success(let prepared):
                status = prepared.status
                for (name, value) in prepared.headers { headers[name] = value }
                framing = prepared.framing
                if let range = prepared.range {
                    if isHead {
                        Glibc.close(range.fd)
                    } else {
                        file = range
                        bodyBytes = Int64(range.end - range.start)
                    }
                }
                if let extra = prepared.body, !isHead {
                    bodyBytes = Int64(extra.count)
                    stream = nil
                    out.reserveCapacity(256 + extra.count)
                    ResponseHeadEncoder.encode(status: status, headers: headers, date: loop.dateHeader,
                                               framing: framing, keepAlive: machine.keepAlive, into: &out)
                    let headBytes = out.count
                    out.append(contentsOf: extra)
                    self.response = progressRecord.reset(sequence: sequence, method: method, path: path, status: status,
                                                     startedAt: startedAt, headBytes: headBytes, bodyBytes: bodyBytes,
                                                     isStream: false, chunked: false, complete: true)
                    writes.append(out)
                    flush()
                    return nil
                }
            }
        case .push(let body):
            if HTTPStatus.forbidsBody(status) {
                framing = .none
            } else if let length = body.length {
                framing = .length(length)
            } else {
                framing = minor >= 1 ? .chunked : .closeDelimited
            }
            if framing == .closeDelimited { machine.responseRequiresClose() }
            let feeds = !isHead && framing != .none && body.length != 0
            pushStart = PushStream(connection: self, sequence: sequence, source: body.source, length: body.length,
                                   chunked: framing == .chunked)
            if !feeds { pushStart?.markEnded() }
        case .stream(let body):
            if isHead || HTTPStatus.forbidsBody(status) {
                framing = HTTPStatus.forbidsBody(status) ? .none : (minor >= 1 ? .chunked : .closeDelimited)
            } else if minor >= 1 {
                framing = .chunked
                chunked = true
                stream = body
            } else {
                framing = .closeDelimited
                stream = body
            }
            if framing == .closeDelimited { machine.responseRequiresClose() }
        }
        ResponseHeadEncoder.encode(status: status, headers: headers, date: loop.dateHeader, framing: framing,
                                   keepAlive: machine.keepAlive, into: &out)
        let pushFeeds = pushStart.map { !$0.isEnded } ?? false
        self.response = progressRecord.reset(sequence: sequence, method: method, path: path, status: status,
                                         startedAt: startedAt, headBytes: out.count, bodyBytes: bodyBytes,
                                         isStream: stream != nil || pushFeeds, chunked: chunked || pushStart?.chunked == true,
                                         complete: stream == nil && !pushFeeds)
        writes.append(out)
        if let file { writes.appendFile(fd: file.fd, offset: file.start, end: file.end) }
        if let pushStart {
            if pushFeeds {
                push = pushStart
                flush()
                if !isClosed { startPush(pushStart) }
                return nil
            }
            // No body to feed (HEAD, an empty or bodiless answer): the source hears so at once.
            pushStart.source.ended(pushStart, completed: true)
        }
        flush()
        return isClosed ? nil : stream
    }

    /// Whether this response leaves for a bulk loop (`BulkPolicy`); never from a bulk loop itself,
    /// nor beyond the connection limits (its place is this loop's to give back).
    private func movesToBulk(_ shape: BulkPolicy.Shape, status: Int, isHead: Bool) -> Bool {
        guard home == nil, beyondLimit == nil, !server.bulkTargets.isEmpty, server.handovers.isOpen else { return false }
        var shape = shape
        if HTTPStatus.forbidsBody(status) || shape == .push(length: 0) { shape = .inMemory }
        return BulkPolicy.moves(shape, isHead: isHead, minimumBytes: server.bulkMinimumBodyBytes,
                                bulkLoops: server.bulkTargets.count, outputQueued: !writes.isEmpty)
    }

    /// The stream closure of request `sequence` returned (or threw).
    func endStream(sequence: UInt64, failed: Bool) {
        guard !isClosed, let progress = response, progress.sequence == sequence, progress.isStream else { return }
        if failed && !machine.draining {
            close(because: "the stream's handler failed")  // an abrupt end tells the client the body is incomplete
            return
        }
        response?.complete = true
        if progress.chunked { writes.append(ResponseHeadEncoder.lastChunk) } else { machine.responseRequiresClose() }
        flush()
    }

    func logAccess(_ progress: ResponseProgress) {
        guard let log = server.accessLog else { return }
        let seconds = Double(loop.now &- progress.startedAt) / 1e9
        log(AccessLogEntry(method: progress.method, path: progress.path, status: progress.status,
                           bytes: progress.deliveredBodyBytes, durationSeconds: seconds, remoteAddress: remoteAddress,
                           aborted: progress.abortReason))
    }
}
