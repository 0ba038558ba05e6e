import Foundation
import Glibc

/// `TestOrigin`'s connection side: the accept loop and one blocking thread per connection.
extension TestOrigin {
    var stopped: Bool { state.withLock { $0.stopped } }

    func acceptLoop() {
        defer { close(listener) }
        while let fd = OriginSocket.accept(listener) {
            let connection = state.withLock { state -> Int? in
                guard !state.stopped, state.open.count < Self.maxConnections else { return nil }
                state.open.insert(fd)
                state.accepted += 1
                return state.accepted - 1
            }
            guard let connection else {
                close(fd)
                if stopped { return }
                continue
            }
            threads.enter()
            Thread.detachNewThread { [self] in
                serve(fd, connection: connection)
                state.withLock { _ = $0.open.remove(fd) }  // Before close, so stop() never shuts a reused fd.
                close(fd)
                threads.leave()
            }
        }
    }

    // MARK: One connection

    fileprivate func serve(_ fd: Int32, connection: Int) {
        OriginSocket.setReceiveTimeout(fd, seconds: state.withLock { $0.settings.idleTimeout })
        var pending: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        while !stopped {
            switch OriginRequestParser.parse(pending) {
            case .needMoreData:
                let count = scratch.withUnsafeMutableBytes { OriginSocket.receive(fd, into: $0) }
                guard let count else { return }
                pending += scratch[..<count]
            case .invalid(let reason):
                _ = OriginSocket.send(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                _ = reason
                return
            case .parsed(let method, let target, let version, let headers, let length):
                pending.removeFirst(length)
                let request = RecordedRequest(method: method, path: String(target.split(separator: "?").first ?? ""),
                                              headers: headers, connection: connection)
                guard discardRequestBody(fd, request: request, pending: &pending) else {
                    _ = OriginSocket.send(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                }
                let response = decide(request)
                let keepOpen = state.withLock { $0.settings.ignoreConnectionClose }
                let clientCloses = !keepOpen && (request.header("connection")?.lowercased() == "close" || version == "HTTP/1.0")
                guard write(response, to: fd, clientCloses: clientCloses) else { return }
                if response.close || clientCloses || response.cutAfter != nil || response.stallAfter != nil { return }
            }
        }
    }

    /// Reads and drops a request body of Content-Length ≤ 1 MiB; false for anything else.
    fileprivate func discardRequestBody(_ fd: Int32, request: RecordedRequest, pending: inout [UInt8]) -> Bool {
        if request.header("transfer-encoding") != nil { return false }
        guard let lengthText = request.header("content-length") else { return true }
        guard let length = Int(lengthText), length >= 0, length <= 1 << 20 else { return false }
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        while pending.count < length {
            let count = scratch.withUnsafeMutableBytes { OriginSocket.receive(fd, into: $0) }
            guard let count else { return false }
            pending += scratch[..<count]
        }
        pending.removeFirst(length)
        return true
    }

    /// Records `request`, consumes a fault if it hits a resource, and decides the answer.
    fileprivate func decide(_ request: RecordedRequest) -> OriginResponse {
        state.withLock { state in
            state.requests.append(request)
            if state.requests.count > Self.maxRecordedRequests { state.requests.removeFirst() }
            if request.method == "GET" {
                let total = (state.getCounts[request.path] ?? 0) + 1
                state.getCounts[request.path] = total
                for (id, waiter) in state.waiters where waiter.path == request.path && waiter.count <= total {
                    state.waiters.removeValue(forKey: id)?.continuation.resume()  // Only schedules the waiter.
                }
            }
            let redirect = state.redirects[request.path]
            let resource = redirect == nil ? state.resources[request.path] : nil
            var fault: Fault?
            if resource != nil, !state.faults.isEmpty {
                fault = state.faults[0].fault
                state.faults[0].remaining -= 1
                if state.faults[0].remaining == 0 { state.faults.removeFirst() }
            }
            return OriginResponder.respond(
                method: request.method, path: request.path, headers: request.headers,
                resource: resource, redirect: redirect.map { ($0.to, $0.status) },
                settings: state.settings, fault: fault, baseURL: baseURL, now: Int(Date().timeIntervalSince1970))
        }
    }

    fileprivate func write(_ response: OriginResponse, to fd: Int32, clientCloses: Bool) -> Bool {
        var head = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        for field in response.headers { head += "\(field.name): \(field.value)\r\n" }
        var body: [UInt8] = []
        if case .text(let text) = response.body {
            body = Array(text.utf8)
            head += "Content-Length: \(body.count)\r\nContent-Type: text/plain\r\n"
        }
        if response.close || clientCloses { head += "Connection: close\r\n" }
        head += "\r\n"
        if let delay = state.withLock({ $0.settings.headByteDelay }) {
            for byte in head.utf8 {
                guard !stopped, withUnsafeBytes(of: byte, { OriginSocket.send(fd, $0) }) else { return false }
                usleep(useconds_t(delay * 1_000_000))  // Pacing the origin, not synchronising a test.
            }
        } else {
            guard OriginSocket.send(fd, head) else { return false }
        }
        switch response.body {
        case .none:
            return true
        case .text:
            guard let cut = response.cutAfter else { return body.withUnsafeBytes { OriginSocket.send(fd, $0) } }
            guard body.prefix(cut).withUnsafeBytes({ OriginSocket.send(fd, $0) }) else { return false }
            endCut(fd, response)
            return false
        case .resource(let seed, let range):
            let limit = min(range.count, response.cutAfter ?? response.stallAfter ?? range.count)
            if let declared = response.announcedLength, declared < limit {
                // Bytes past the announced end come in a write of their own, a moment later.
                guard sendBody(fd, seed: seed, range: range.lowerBound..<(range.lowerBound + declared)) else { return false }
                usleep(50_000)  // Pacing the origin, not synchronising a test.
                return sendBody(fd, seed: seed, range: (range.lowerBound + declared)..<(range.lowerBound + limit))
            }
            guard sendBody(fd, seed: seed, range: range.lowerBound..<(range.lowerBound + limit), chunked: response.chunked,
                           lastChunk: limit == range.count) else { return false }
            if response.cutAfter != nil {
                endCut(fd, response)
                return false
            }
            if response.stallAfter != nil {
                holdStalled(fd)
                return false
            }
            return true
        }
    }

    /// Ends a response cut after `cutAfter` body bytes (the caller then returns false: serve() closes `fd`).
    fileprivate func endCut(_ fd: Int32, _ response: OriginResponse) {
        state.withLock { $0.cuts += 1 }  // Before the client can see the end.
        if let path = response.changeVersionOf { changeVersion(path: path) }  // Before the client can ask again.
        if let resize = response.resizeTo { resizeKeepingValidators(path: resize.path, size: resize.size) }
        if response.reset {
            OriginSocket.resetOnClose(fd)  // serve() closes it: RST instead of FIN.
        } else {
            _ = shutdown(fd, Int32(SHUT_WR))
        }
    }

    /// Sends body bytes in chunks, throttled when `bytesPerSecond` is set (checked per chunk).
    /// `chunked`: in chunked coding, ending with the last chunk when `lastChunk`.
    fileprivate func sendBody(_ fd: Int32, seed: UInt64, range: Range<Int>, chunked: Bool = false, lastChunk: Bool = true) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var offset = range.lowerBound
        while offset < range.upperBound {
            let (rate, stopped) = state.withLock { ($0.settings.bytesPerSecond, $0.stopped) }
            if stopped { return false }
            var chunk = min(buffer.count, range.upperBound - offset)
            if let rate { chunk = min(chunk, max(1, rate / 20)) }
            let sent = buffer.withUnsafeMutableBytes { raw -> Bool in
                let slice = UnsafeMutableRawBufferPointer(rebasing: raw[0..<chunk])
                OriginBody.fill(slice, seed: seed, offset: offset)
                if chunked && !OriginSocket.send(fd, String(chunk, radix: 16) + "\r\n") { return false }
                return OriginSocket.send(fd, UnsafeRawBufferPointer(slice)) && (!chunked || OriginSocket.send(fd, "\r\n"))
            }
            guard sent else { return false }
            state.withLock { $0.bodyBytesSent += Int64(chunk) }
            offset += chunk
            if rate != nil { usleep(50_000) }  // Pacing the origin, not synchronising a test.
        }
        return !chunked || !lastChunk || OriginSocket.send(fd, "0\r\n\r\n")
    }

    /// Holds a stalled connection until the peer leaves, `stallBound` passes or the origin stops.
    /// The bound is read again as it waits, so a test can end a stall by lowering it.
    fileprivate func holdStalled(_ fd: Int32) {
        let start = Date()
        while Date() < start.addingTimeInterval(state.withLock { $0.settings.stallBound }) && !stopped {
            if OriginSocket.peerClosed(fd, withinMilliseconds: 50) { return }
        }
    }

    fileprivate static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
