import CLinux
import Foundation

extension Connection {
    /// Hands the complete request in `current` to the connection's handler task, starting that
    /// task on first use. One long-lived task per busy connection (instead of one per request)
    /// saves task creation and executor-preference bookkeeping on every keep-alive request. The
    /// request waits in `queuedRequest`; a waiting task is resumed with a plain `true`, so the
    /// request itself is never copied through the continuation.
    func startHandler() {
        guard current != nil else { return }
        swap(&current!.request.body, &body)
        current!.request.remoteAddress = remoteAddress
        updateDeadline()
        queuedRequest = PendingRequest(head: current.take()!, sequence: requestSequence, startedAt: headStartedAt)
        if let waiter = requestWaiter.take() {
            waiter.resume(returning: true)
            return
        }
        if handlerTaskActive { return }  // the task is finishing the previous request's tail
        handlerTaskActive = true
        // The task prefers this loop as its executor: it runs on the loop thread right after the
        // current I/O batch, so a handler that never suspends costs no thread hop. (Task.immediate
        // was measured: ~30% more CPU per request here, so it is not used.)
        task = Task(executorPreference: loop) { [self] in await serveRequests() }
    }

    /// The handler task's body: serves queued requests until the connection closes or the task is
    /// released while idle. `nonisolated(nonsending)` (like `HTTPHandler`) so calls stay on the
    /// task's executor without an executor switch (each switch of a task with an executor
    /// preference takes the task's status lock).
    private nonisolated(nonsending) func serveRequests() async {
        while true {
            if !loop.inEventLoop { await loop.hop() }
            // A request already handed over is served even if the client left meanwhile: the
            // handler runs and the request still gets its access-log entry.
            guard let pending = queuedRequest.take() else {
                if isClosed {
                    handlerTaskActive = false
                    return
                }
                waitingSince = loop.now
                let proceed = await withUnsafeContinuation { requestWaiter = $0 }
                if !proceed { return }  // closed, or released while idle
                continue
            }
            let request = pending.head.request
            var response: Response
            do {
                response = try await server.handler(request)
            } catch {
                response = Response.error(status: 500, code: "internal", message: "the request handler failed")
            }
            if !loop.inEventLoop { await loop.hop() }
            if let stream = beginResponse(response, method: request.method, path: request.path,
                                          minor: request.version.minor, requestHeaders: request.headers,
                                          sequence: pending.sequence, startedAt: pending.startedAt) {
                await runStream(stream, sequence: pending.sequence)
            }
        }
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

    /// Ends the handler task if it has waited for a request since before `cutoff`, so idle
    /// keep-alive connections hold no task (the next request starts a new one).
    func releaseIdleHandlerTask(waitingSince cutoff: UInt64) {
        guard requestWaiter != nil, waitingSince < cutoff, let waiter = requestWaiter.take() else { return }
        handlerTaskActive = false
        task = nil
        waiter.resume(returning: false)
    }

    /// Queues the response head and body. Returns the stream closure when the body is a stream
    /// that should run now.
    @discardableResult
    func beginResponse(_ response: Response, method: String, path: String, minor: Int,
                       requestHeaders: HTTPHeaders, sequence: UInt64,
                       startedAt: UInt64) -> (@Sendable (any ResponseBodyWriter) async throws -> Void)? {
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
        var status = response.status
        var headers = response.headers
        var out: [UInt8] = []
        var bodyBytes: Int64 = 0
        var file: FileRange?
        var stream: (@Sendable (any ResponseBodyWriter) async throws -> Void)?
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
            // Reuse the loop's scratch buffer: it comes back unique when the send completed.
            out = loop.scratch
            loop.scratch = []
            out.removeAll(keepingCapacity: true)
            out.reserveCapacity(160 + headers.count * 40 + Int(bodyBytes))
            ResponseHeadEncoder.encode(status: status, headers: headers, date: loop.dateHeader, framing: framing,
                                       keepAlive: machine.keepAlive, into: &out)
            let headBytes = out.count
            if bodyBytes > 0 { out.append(contentsOf: bytes) }
            self.response = ResponseProgress(sequence: sequence, method: method, path: path, status: status,
                                             startedAt: startedAt, headBytes: headBytes, bodyBytes: bodyBytes,
                                             isStream: false, chunked: false, complete: true)
            writeNow(out)
            if out.capacity <= 64 * 1024 { loop.scratch = out }
            return nil
        case .file(let fileResponse):
            switch FileServer.prepare(fileResponse, method: method, requestHeaders: requestHeaders) {
            case .failure(let errorResponse):
                return beginResponse(errorResponse, method: method, path: path, minor: minor,
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
                    self.response = ResponseProgress(sequence: sequence, method: method, path: path, status: status,
                                                     startedAt: startedAt, headBytes: headBytes, bodyBytes: bodyBytes,
                                                     isStream: false, chunked: false, complete: true)
                    writes.append(out)
                    flush()
                    return nil
                }
            }
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
        self.response = ResponseProgress(sequence: sequence, method: method, path: path, status: status,
                                         startedAt: startedAt, headBytes: out.count, bodyBytes: bodyBytes,
                                         isStream: stream != nil, chunked: chunked, complete: stream == nil)
        writes.append(out)
        if let file { writes.appendFile(fd: file.fd, offset: file.start, end: file.end) }
        flush()
        return isClosed ? nil : stream
    }

    /// The stream closure of request `sequence` returned (or threw).
    func endStream(sequence: UInt64, failed: Bool) {
        guard !isClosed, let progress = response, progress.sequence == sequence, progress.isStream else { return }
        if failed && !machine.draining {
            close()  // an abrupt end tells the client the body is incomplete
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
                           bytes: progress.deliveredBodyBytes, durationSeconds: seconds, remoteAddress: remoteAddress))
    }
}
