import DownloaderEngine
import Foundation
import MiniHTTPServer

/// The REST API: routes requests to the engine and turns its answers into JSON responses.
struct DownloadAPI: Sendable {
    let engine: DownloadEngine
    let metrics: ServiceMetrics
    let auth: BearerAuth?
    /// `--admin-token`: guards `/admin/*` (nil: `auth` does); also accepted wherever `auth` is.
    var adminAuth: BearerAuth? = nil
    /// Listening on loopback without a token: only requests naming this machine (`LoopbackHostGuard`).
    var onlyLocalHostNames = false
    /// Seconds between `: keep-alive` comments on progress streams (default 15).
    var keepAliveInterval: Double = 15
    /// Progress streams per download (`--max-subscribers-per-download`); beyond it 503 `too_many_subscribers`.
    var subscriberQuota = SubscriberQuota(limit: 16_384)
    /// Live caller tokens per client address (`--max-downloads-per-client`); nil = no limit.
    var callerQuota: (any CallerLimit)? = nil
    /// Seconds a `DELETE` of a token waits for its commit before it is answered anyway.
    var cancelCommitWait: Double = 5
    /// `GET /events` streams at once (`--max-event-subscribers`); beyond it 503 `too_many_subscribers`.
    var eventSubscriberQuota = SubscriberQuota(limit: 1_024)
    /// `HEAD /fetch` probes to origins at once per client address, a share of the engine's 64:
    /// beyond it 503 `busy` (one client cannot hold every probe).
    var probeQuota = SubscriberQuota(limit: 16)
    /// Each event's SSE data, encoded once for all the download's streams.
    let eventData = EventDataCache()
    /// Each download's latest snapshot as JSON, for `GET /downloads/{id}`.
    let snapshotBodies = LatestEncodingCache<DownloadSnapshot, [UInt8]>()
    /// The answer of `GET /healthz`.
    static let healthBody = Array(#"{"status":"ok"}"#.utf8)
    /// Set when a SIGTERM began the stop: `/readyz` answers 503 (`--shutdown-delay`).
    var drain = ShutdownDrain()
    /// Signs and checks links to one file that need no token (`GET /downloads/{id}/file-link`).
    var fileLinks = FileLink(secret: (0..<32).map { _ in UInt8.random(in: .min ... .max) })
    /// Cluster mode: the database (`/healthz`, `/readyz`, 503 `database_unavailable` while it is lost).
    var cluster: ClusterDatabase? = nil
    /// Cluster mode: requests for downloads another replica holds go to it (`DownloadAPI+Forwarding`).
    var forwarding = Forwarding()
    /// Cluster mode: where the requests that may wait on the database are handled (off the loop).
    var databaseWork: DatabaseWorkers? = nil

    func respond(to request: Request) async -> Response {
        if let databaseWork, AdminEndpoint.isAdmin(request.path) || DatabaseWorkers.mayWait(Endpoint(path: request.path)) {
            return await databaseWork.run { await respondAskingAgain(to: request) }
        }
        return await respondAskingAgain(to: request)
    }

    private func respondAskingAgain(to request: Request) async -> Response {
        var answer = await respondOnce(to: request)
        var tries = 1
        while let delay = askAgainDelay(answer, request, tries: tries) {
            try? await Task.sleep(for: delay)
            tries += 1
            answer = await respondOnce(to: request)
        }
        if !ForwardedHeaders.isForwarded(request.headers) { answer.headers.remove(ForwardedHeaders.hopRefused) }
        return answer
    }

    private func respondOnce(to request: Request) async -> Response {
        if onlyLocalHostNames, let refusal = LoopbackHostGuard.refusal(headers: request.headers) { return refusal.response }
        if let refusal = CrossSiteGuard.refusal(method: request.method, path: request.path, headers: request.headers) { return refusal.response }
        if AdminEndpoint.isAdmin(request.path) { return await admin(request) }
        guard let endpoint = Endpoint(path: request.path) else {
            return APIError.notFound("no resource at \(request.path)").response
        }
        guard endpoint.allows(request.method) else {
            return APIError.methodNotAllowed(request.method, allow: endpoint.allowedMethods).response
        }
        // A live link to one file (`FileLink`) stands for the token and for the right to read it.
        let linked = isLiveFileLink(endpoint, request)
        if endpoint != .health, endpoint != .page, endpoint != .ready, !linked {
            switch access.callerAccess(authorization: QueryToken.authorization(for: endpoint, request)) {
            case .allowed: break
            case .missing: return APIError.unauthorized.response
            case .wrong: return APIError(status: 403, .forbidden, "wrong token (neither the service's token nor the admin token)").response
            }
        }
        if !linked, let id = Self.readDownloadID(endpoint, method: request.method), let refusal = readRefusal(id: id, request, endpoint: endpoint) {
            return refusal
        }
        if let refusal = clusterRefusal(endpoint, request) { return refusal }
        if let answer = await forwardedAnswer(endpoint, request) { return answer }
        switch (endpoint, request.method) {
        case (.health, _):
            return healthResponse()
        case (.ready, _):
            return readyResponse()
        case (.metrics, _):
            return metricsResponse()
        case (.downloads, "POST"):
            return await create(request)
        case (.downloads, _):
            return list(request)
        case (.download(let token), "DELETE"):
            let cancelled: DownloadSnapshot?
            do throws(EngineError) { cancelled = try engine.cancelling(token: token) } catch { return await answer(error, request) }
            guard let snapshot = cancelled else {
                return APIError.notFound("no caller holds token \(token) (unknown or already cancelled)").response
            }
            callerQuota?.remove(token)
            // Answered once the cancel is committed: a crash right after cannot bring the token back.
            _ = await engine.committed(within: cancelCommitWait)
            return .json(SnapshotJSON.object(snapshot).bytes)
        case (.download(let id), _):
            guard let snapshot = engine.snapshot(id: id) else { return unknownDownloadResponse(id) }
            return .json(snapshotBodies.encoded(snapshot, id: id) { SnapshotJSON.object($0).bytes })
        case (.progress(let id), _):
            return progress(id: id, request: request)
        case (.file(let id), _):
            if let stored = engine.completedFile(id: id) { return served(stored) }
            return await fileFromHolder(id: id, request) ?? notComplete(id: id)
        case (.fileLink(let id), _):
            return fileLink(id: id)
        case (.fetch, _):
            return await fetch(request)
        case (.events, _):
            return events(request)
        case (.page, _):
            return OperatorPage.response
        }
    }

    private func create(_ request: Request) async -> Response {
        var parsed: DownloadRequest
        let body: Any
        switch CreateDownloadBody.parseWithObject(request.body) {
        case .success(let r): (parsed, body) = r
        case .failure(let error): return error.response
        }
        let callback: CallbackRequest?
        switch self.callback(in: body) {
        case .success(let c): callback = c
        case .failure(let error): return error.response
        }
        parsed.client = clientAddress(request)
        let client = clientNetwork(request)
        parsed.clientGroup = client
        if let quota = callerQuota, !quota.reserve(client) {
            return APIError.tooManyDownloads(limit: quota.limit).response
        }
        do {
            let enqueued = try engine.request(parsed)
            callerQuota?.commit(client, token: enqueued.token)
            if let callback, let error = await register(callback, for: enqueued) { return error.response }
            var headers = HTTPHeaders()
            headers["Location"] = "/downloads/\(enqueued.snapshot.id)"
            let status = enqueued.snapshot.state == .completed ? 200 : 202
            var body = SnapshotJSON.enqueued(enqueued)
            if let callback { body["callback"] = WebhookBody.shown(callback) }
            return .json(status: status, body.bytes, headers: headers)
        } catch {
            callerQuota?.cancel(client)
            return await answer(error, request)
        }
    }

    /// A page of the downloads this request may list, newest first (`DownloadListPage`); `next`
    /// and a `Link` to the page after it when more follow.
    private func list(_ request: Request) -> Response {
        let query: DownloadListPage
        switch DownloadListPage.parse(request.queryItems) {
        case .success(let parsed): query = parsed
        case .failure(let error): return error.response
        }
        // Private downloads are left out before paging (in the database too), so that a page is
        // whole and its `next` names a download this request may list. One more than the page is
        // read: whether a next page follows.
        let seesPrivate = access(isPrivate: true, request, id: nil).allowsListing
        let page = query.page(of: engine.list(state: query.state, after: query.after, limit: query.limit + 1, includingPrivate: seesPrivate))
        var body = JSONObject(["downloads": .array(page.downloads.map { .object(SnapshotJSON.object($0)) })])
        var headers = HTTPHeaders()
        if let next = page.next {
            body["next"] = .string(next.text)
            headers["Link"] = "<\(query.nextPath(next))>; rel=\"next\""
        }
        return .json(body.bytes, headers: headers)
    }

    /// `alsoMatching`: other strong validators of the stored content honoured in `If-Range`,
    /// `If-Match` and `If-None-Match` (besides its SHA-256 and the origin's ETag).
    func file(id: String, alsoMatching: [String] = []) -> Response {
        guard let stored = engine.completedFile(id: id) else { return notComplete(id: id) }
        return served(stored, alsoMatching: alsoMatching)
    }

    /// `409 not_complete` for a download whose file is not served yet (`404` for an unknown one).
    private func notComplete(id: String) -> Response {
        guard let snapshot = engine.snapshot(id: id) else { return unknownDownloadResponse(id) }
        return APIError(status: 409, .notComplete,
                        "download \(id) is \(snapshot.state.rawValue); its file is served once completed").response
    }

    /// The completed file `stored`, with its validators and the origin's type (an attachment, never
    /// sniffed: a browser saves it, it does not render it as a page of this service). Its ETag is
    /// the SHA-256; conditions naming the origin's strong ETag of this version hold too, and an
    /// `If-Range` with the origin's `Last-Modified` when that was its validator (a client that
    /// fetched it from the origin, or through `/fetch` while it was landing, may resume with it).
    private func served(_ stored: CompletedFile, alsoMatching: [String] = []) -> Response {
        var served = FileResponse(path: stored.path, contentType: stored.contentType ?? "application/octet-stream",
                                  contentDisposition: FileHeaders.attachment(fileName: stored.fileName), etag: "\"\(stored.sha256)\"")
        served.followsSymlinks = false  // a link planted in a storage area is never followed out of it
        served.alsoMatches = alsoMatching
        if let origin = stored.originETag, !alsoMatching.contains(origin) { served.alsoMatches.append(origin) }
        if let date = stored.originLastModified { served.alsoModified = [date] }
        var response = Response(headers: ["X-Content-Type-Options": "nosniff"], body: .file(served))
        if let digest = FileHeaders.reprDigest(sha256Hex: stored.sha256) { response.headers["Repr-Digest"] = digest }
        return response
    }

    private func metricsResponse() -> Response {
        var statistics = engine.statistics
        let counts = engine.stateCounts()
        statistics.waitingForSpace = counts.waitingForSpace
        let text = ServiceMetrics.render(states: counts.states, engine: statistics, eventWatchers: engine.feedWatchers,
                                         http: metrics.http)
            + WebhookMetrics.render(engine.webhooks.statistics)
        return Response(headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"], body: .bytes(Array(text.utf8)))
    }
}

extension APIError {
    /// The HTTP face of an engine error: exhaustive, so a new `EngineError.Code` does not compile
    /// until it has a status here (and a line in openapi.yaml, which `ErrorCodeContractTests` checks).
    init(engineError error: EngineError) {
        switch error.code {
        case .invalidURL, .invalidChecksum, .urlCredentials, .invalidHeaders:
            self.init(status: 400, error.code, error.message)
        case .destinationForbidden:
            self.init(status: 403, error.code, error.message)
        case .conflict:
            self.init(status: 409, error.code, error.message)
        case .tooManyCallers:
            self.init(status: 429, error.code, error.message, headers: ["Retry-After": "60"])
        case .shuttingDown:
            self.init(status: 503, error.code, error.message, headers: ["Retry-After": "5"])
        case .busy:
            self.init(status: 503, error.code, error.message, headers: ["Retry-After": "1"])
        case .heldElsewhere:
            self.init(status: 503, error.code, error.message, headers: ["Retry-After": "1"])
        case .databaseUnavailable, .stateUnavailable:
            self.init(status: 503, error.code, error.message, headers: ["Retry-After": DownloadAPI.databaseRetryAfter])
        }
    }
}
