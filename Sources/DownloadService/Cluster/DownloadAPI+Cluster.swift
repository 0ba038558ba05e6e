import DownloaderEngine
import MiniHTTPServer

// Cluster mode's answers: `/healthz` names the database's reachability (and stays 200: liveness),
// `/readyz` is 503 while the database is lost (readiness), and so is everything that needs it.
// `/readyz` is also 503, in either mode, while the state store's commits fail.
extension DownloadAPI {
    /// Seconds a client is told to wait while the database is unreachable.
    static let databaseRetryAfter = "5"

    /// The answer while the database is unreachable, to an endpoint that needs it: 503
    /// `database_unavailable` for `/downloads…`, `/fetch` and `/admin/…` (refused in `admin(_:)`),
    /// except files already known complete: those the engine holds, and those this replica saw
    /// completed (`knownCompletion`, `completedFile`): `/downloads/{id}/file`, and `/fetch` of their
    /// URL (answered here, as a completed download's `/fetch`). nil (act as usual) in
    /// single-process mode, while the database answers, and for the other endpoints.
    func clusterRefusal(_ endpoint: Endpoint, _ request: Request) -> Response? {
        guard let cluster, !cluster.isReachable else { return nil }
        switch endpoint {
        case .downloads, .download, .progress, .fileLink: return Self.databaseUnavailable(cluster).response
        case .fetch:
            if case .success(let query) = FetchQuery.parse(request.query) {
                if engine.peek(query.request)?.state.phase == .completed { return nil }
                // A malformed sha256 is refused as its GET would be (`400`); one that names
                // another file, or a size it does not have, is not answered by this one.
                do throws(EngineError) { try engine.screenExpectations(query.request) } catch { return APIError(engineError: error).response }
                if let (id, tail) = engine.knownCompletion(query.request) { return fetchStored(id: id, tail: tail) }
            }
            return Self.databaseUnavailable(cluster).response
        case .file(let id):
            return engine.completedFile(id: id) == nil ? Self.databaseUnavailable(cluster).response : nil
        case .health, .ready, .metrics, .events, .page: return nil
        }
    }

    func healthResponse() -> Response {
        guard let cluster else { return .json(Self.healthBody) }
        var body = JSONObject()
        body.append("status", .string("ok"))
        body.append("database", .string(cluster.isReachable ? "reachable" : "unreachable"))
        return .json(body.bytes)
    }

    /// 503 once a shutdown began (`shutting_down`; `--shutdown-delay` keeps the rest serving), while
    /// the cluster database is lost, and while the state store's commits fail (a full or failing
    /// disk: what the service decides would not survive a crash).
    func readyResponse() -> Response {
        if drain.isDraining || engine.isShuttingDown {
            return APIError(engineError: .shuttingDown("the service is shutting down")).response
        }
        if let cluster, !cluster.isReachable { return Self.databaseUnavailable(cluster).response }
        if let failure = engine.statistics.stateFailure {
            return APIError(status: 503, EngineError.Code.stateUnavailable, "the state database cannot record changes (\(failure)); retried every second",
                            headers: ["Retry-After": Self.databaseRetryAfter]).response
        }
        return .json(Self.readyBody)
    }

    static let readyBody = Array(#"{"status":"ready"}"#.utf8)

    static func databaseUnavailable(_ cluster: ClusterDatabase) -> APIError {
        APIError(status: 503, APIError.Code.databaseUnavailable, "the cluster database \(cluster.address) is unreachable; try again shortly",
                 headers: ["Retry-After": databaseRetryAfter])
    }
}
