import DownloaderEngine
import Foundation
import MiniHTTPServer
import Synchronization

/// `GET /fetch?url=…`: pull-through. The request joins (or starts, or resumes) the download of the
/// URL as a reader whose interest lasts as long as its connection, and gets the body: the stored
/// file when completed, else the bytes as they land (`FetchPlan`, `FetchStream`).
extension DownloadAPI {
    /// How long a `/fetch` queued behind `--max-concurrent` waits for a slot before `503 queued`.
    static let queuedPatience: Double = 10
    /// A bare `Range` on a download whose file changed within this many seconds is `409 changed`.
    static let changedWindow: Double = 600

    func fetch(_ request: Request) async -> Response {
        let query: FetchQuery
        switch FetchQuery.parse(request.query) {
        case .success(let q): query = q
        case .failure(let error): return error.response
        }
        if request.method == "HEAD" { return await fetchHead(query, request) }
        let reader: DownloadReader
        var asked = query.request
        asked.client = clientAddress(request)
        asked.clientGroup = clientNetwork(request)
        do {
            reader = try engine.attachReader(asked)
        } catch {
            return naming(error.downloadID, await answer(error, request, streamed: true))
        }
        // A reader that joined a download not transferring right now waits for the origin's answer.
        let awaitingHeadsAbove: UInt64? = reader.state.phase == .flowing ? nil : reader.state.heads
        let changes = ChangeSignal()
        reader.watch { changes.signal() }
        var patience = FetchPatience(queuedLimit: Self.queuedPatience, stallTimeout: engine.configuration.stallTimeout)
        let mayChunk = request.version.major > 1 || request.version.minor >= 1
        while true {
            let tail = reader.state
            let awaiting = awaitingHeadsAbove.map { tail.heads <= $0 } ?? false
            let plan = fetchPlan(id: reader.id, tail: tail, request, awaitingHead: awaiting, mayChunk: mayChunk)
            switch plan {
            case .wait:
                // The client went away (or shut down its side, as an interrupted client does): nobody reads this answer.
                if Task.isCancelled || request.peerSide?.hasShutDown == true {
                    reader.close()
                    return APIError(status: 503, .queued, "the client went away").response
                }
                // Nothing resumes any more: answered now, not cut when the server's grace ends.
                if engine.isShuttingDown {
                    reader.close()
                    return naming(reader.id, APIError(engineError: .shuttingDown("the service is shutting down; try again shortly")).response)
                }
                let stand = Self.stand(of: engine.snapshot(id: reader.id))
                if let answer = givingUp(patience.judge(stand), id: reader.id) {
                    reader.close()
                    return answer.response
                }
                let started = DispatchTime.now().uptimeNanoseconds  // Monotonic: a step of the wall clock changes no wait.
                await changes.wait(seconds: 1)
                patience.waited(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9, at: stand)
            case .serveStored, .fail:
                // The reader's view is brought up to date by the engine's effects, which another
                // thread may still be running: a join that restarted a failed download (or one
                // whose file vanished) can see the old ending for a moment. The download decides.
                if let now = engine.snapshot(id: reader.id)?.state, now != (plan == .serveStored ? .completed : .failed) {
                    await changes.wait(seconds: 1)
                    continue
                }
                reader.close()
                if case .fail(let status, let failure) = plan { return fetchFailure(status: status, failure, id: reader.id) }
                return fetchStored(id: reader.id, tail: tail)
            case .refuse, .notModified:
                reader.close()
                return bodiless(plan, id: reader.id, tail: tail)
            case .stream(let streaming):
                return streamResponse(streaming, id: reader.id, tail: tail,
                                      source: FetchStream(reader: reader, plan: streaming, patience: engine.configuration.stallTimeout))
            case .removed:
                reader.close()
                return naming(reader.id, unknownDownloadResponse(reader.id))
            }
        }
    }

    /// Where a download a reader waits on stands (`FetchPatience`). Waiting for disk space counts
    /// only while others want it too: a reader that gave up would leave a download it alone held
    /// paused, and a paused partial is the first the pressure purge deletes (its retry would start
    /// from 0), so a sole reader waits with it (until it fails `disk_full`, or the client leaves).
    static func stand(of snapshot: DownloadSnapshot?) -> FetchPatience.Stand {
        guard let snapshot else { return .moving }
        if snapshot.state == .queued { return .queued }
        if snapshot.pausedBy == .operator { return .held }
        if snapshot.waitsForSpace && snapshot.callers > 1 { return .waitingForSpace }
        return .moving
    }

    /// The answer of a reader that waited long enough (nil: it waits on).
    private func givingUp(_ verdict: FetchPatience.Verdict, id: String) -> APIError? {
        var headers = fetchHeaders(id: id)
        switch verdict {
        case .wait:
            return nil
        case .giveUpQueued:
            headers["Retry-After"] = "10"
            return APIError(status: 503, .queued, "the download waits for a transfer slot; retry later", headers: headers)
        case .giveUpHeld:
            return APIError(status: 504, .stalled, "the download is paused by the operator; no data came for the stall timeout",
                            headers: headers)
        case .giveUpForSpace:
            headers["Retry-After"] = "30"
            return APIError(status: 503, .diskFull, "the download waits for disk space; retry later", headers: headers)
        }
    }

    /// The head of a streamed answer, its bytes from `source` (`HeadOnly` for a `HEAD`).
    private func streamResponse(_ plan: FetchPlan.Streaming, id: String, tail: TailState, source: PushSource) -> Response {
        var headers = HTTPHeaders()
        for (name, value) in fetchHeaders(id: id) { headers[name] = value }
        headers["Content-Type"] = tail.contentType ?? "application/octet-stream"
        headers["Content-Disposition"] = FileHeaders.attachment(fileName: tail.fileName)
        headers["ETag"] = plan.etag
        headers["Accept-Ranges"] = "bytes"
        if let range = plan.contentRange { headers["Content-Range"] = range }
        return Response(status: plan.status, headers: headers, body: .push(PushBody(length: plan.contentLength, source: source)))
    }

    /// What `request` gets from download `id` as `tail` shows it (`FetchPlan`, with its headers).
    private func fetchPlan(id: String, tail: TailState, _ request: Request, awaitingHead: Bool, mayChunk: Bool = true) -> FetchPlan {
        let changed = engine.changed(id: id, within: Self.changedWindow)
        return FetchPlan.decide(id: id, tail: tail, awaitingHead: awaitingHead, range: request.headers["Range"],
                                ifRange: request.headers["If-Range"], ifNoneMatch: request.headers["If-None-Match"],
                                ifMatch: request.headers["If-Match"], changedRecently: changed, mayChunk: mayChunk)
    }

    /// The answers without a body of the version landing: `304`, `409 changed`, `412`, `416`; each
    /// names that version with its `ETag`, so that a client can ask again with `If-Range`.
    private func bodiless(_ plan: FetchPlan, id: String, tail: TailState) -> Response {
        var headers = fetchHeaders(id: id)
        headers["ETag"] = FetchPlan.etag(id: id, tail: tail)
        switch plan {
        case .notModified(let etag):
            headers["ETag"] = etag
            var response = Response(status: 304, body: .empty)
            for (name, value) in headers { response.headers[name] = value }
            return response
        case .refuse(.unsatisfiable(let total)):
            headers["Content-Range"] = "bytes */\(total)"
            return APIError(status: 416, .rangeNotSatisfiable, "the range starts beyond the file's \(total) bytes", headers: headers).response
        case .refuse(.precondition):
            return APIError(status: 412, .preconditionFailed, "If-Match names another version than the one landing", headers: headers)
                .response
        default:
            return APIError(status: 409, .changed, "the file changed at the origin lately: send If-Range with the ETag of the bytes you hold, or fetch it whole",
                            headers: headers).response
        }
    }

    /// A completed download, served as `GET /downloads/{id}/file`; an `If-Range` with the origin's
    /// validator of the stored version is honoured too.
    func fetchStored(id: String, tail: TailState) -> Response {
        naming(id, file(id: id, alsoMatching: [FetchPlan.etag(id: id, tail: tail)]))
    }

    private func fetchFailure(status: Int, _ failure: DownloadFailure, id: String?) -> Response {
        let code = status == 504 ? APIError.Code.stalled.rawValue : failure.code.rawValue
        var error = JSONObject()
        error.append("code", .string(code))
        error.append("message", .string(failure.message))
        if let http = failure.httpStatus { error.append("httpStatus", .int(Int64(http))) }
        return naming(id, .json(status: status, JSONObject(["error": .object(error)]).bytes))
    }

    /// `HEAD /fetch` never starts a download. Its expectations are screened first, as a `GET`'s join
    /// would (`400 invalid_sha256`, `409 conflict`); then a stored file answers with its head, a
    /// running download with the head a `GET` would get (its `Range`, `If-Range`, `If-None-Match`
    /// weighed alike), anything else with one `HEAD` to the origin (under the same guard): a 2xx
    /// gives `200` with its length, type, file name and strong `ETag`, anything else `502` as a `GET` would (also a length
    /// other than `size`: `502 size_mismatch`).
    func fetchHead(_ query: FetchQuery, _ request: Request) async -> Response {
        do throws(EngineError) {
            try engine.screenExpectations(query.request)
        } catch {
            return naming(error.downloadID, APIError(engineError: error).response)
        }
        // A download of the URL that is not transferring (queued, paused, failed): the probe's
        // answer is about it too, and names it.
        var idle: String?
        if let (id, tail) = engine.peek(query.request) {
            let plan = fetchPlan(id: id, tail: tail, request, awaitingHead: false)
            switch plan {
            case .serveStored:
                return fetchStored(id: id, tail: tail)
            case .stream(let streaming):
                return streamResponse(streaming, id: id, tail: tail, source: HeadOnly())
            case .refuse, .notModified:
                return bodiless(plan, id: id, tail: tail)
            case .wait, .fail:
                idle = id
            case .removed:
                break
            }
        }
        guard let share = probeQuota.acquire(clientNetwork(request)) else {
            return APIError(engineError: .busy("\(probeQuota.limit) HEAD probes of this client are running; try again shortly")).response
        }
        defer { withExtendedLifetime(share) {} }
        switch await probeWhileTheClientStays(query.request, request) {
        case .success(.head(let head))?:
            // The head its GET would get, as far as the origin's head tells it.
            var headers = HTTPHeaders()
            headers["Content-Type"] = head.contentType ?? "application/octet-stream"
            headers["Content-Disposition"] = FileHeaders.attachment(fileName: head.fileName)
            headers["Accept-Ranges"] = "bytes"
            if let etag = head.etag { headers["ETag"] = etag }
            return naming(idle, Response(headers: headers, body: .push(PushBody(length: head.contentLength, source: HeadOnly()))))
        case .success(.failed(let failure))?:
            return fetchFailure(status: 502, failure, id: idle)
        case .failure(let error)?:
            return APIError(engineError: error).response
        case nil:
            return APIError(status: 503, .queued, "the client went away").response  // nobody reads it
        }
    }

    /// The engine's `HEAD` probe, ended when the client shuts down its side of the connection (as
    /// an interrupted client does; checked every 250 ms, as `/fetch` waits): each probe holds an
    /// outbound connection for up to the connect and head timeouts. nil: the client left first.
    private func probeWhileTheClientStays(_ download: DownloadRequest, _ request: Request) async -> Result<ProbeOutcome, EngineError>? {
        let engine = self.engine
        return await withTaskGroup(of: Result<ProbeOutcome, EngineError>?.self) { group in
            group.addTask {
                do throws(EngineError) { return .success(try await engine.probe(download)) } catch { return .failure(error) }
            }
            group.addTask {
                while !Task.isCancelled, request.peerSide?.hasShutDown != true { try? await Task.sleep(for: .milliseconds(250)) }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Every `/fetch` answer about a download names it and where to watch it (and is never sniffed).
    func fetchHeaders(id: String) -> [String: String] {
        ["X-Download-Id": id, "Link": "</downloads/\(id)/progress>; rel=\"progress\"", "X-Content-Type-Options": "nosniff"]
    }

    /// `response` with the `fetchHeaders` of download `id`, when it is about one.
    private func naming(_ id: String?, _ response: Response) -> Response {
        guard let id else { return response }
        var named = response
        for (name, value) in fetchHeaders(id: id) { named.headers[name] = value }
        return named
    }
}

/// The body of a `HEAD` answer that describes a body of a known length without sending one.
final class HeadOnly: PushSource {
    func produce(_ stream: PushStream) { stream.abort() }
    func ended(_ stream: PushStream, completed: Bool) {}
}
