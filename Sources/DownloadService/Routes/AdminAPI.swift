import DownloaderEngine
import MiniHTTPServer

/// The operator's resources under `/admin/`, recognised from a request path. Pure.
enum AdminEndpoint: Equatable {
    /// `/admin/downloads/{id}`: DELETE removes the download.
    case download(String)
    /// `/admin/downloads/{id}/pause`
    case pause(String)
    /// `/admin/downloads/{id}/resume`
    case resume(String)

    /// Whether `path` is under `/admin` (checked before anything else: auth comes first there).
    static func isAdmin(_ path: String) -> Bool {
        path == "/admin" || path.hasPrefix("/admin/")
    }

    init?(path: String) {
        var segments = path.split(separator: "/", maxSplits: 5, omittingEmptySubsequences: false).dropFirst()
        if segments.count > 1, segments.last?.isEmpty == true { segments.removeLast() }  // tolerate one trailing slash
        let parts = Array(segments)
        guard parts.count == 3 || parts.count == 4, parts[0] == "admin", parts[1] == "downloads",
              Endpoint.isIdentifier(String(parts[2])) else { return nil }
        let id = String(parts[2])
        if parts.count == 3 {
            self = .download(id)
        } else if parts[3] == "pause" {
            self = .pause(id)
        } else if parts[3] == "resume" {
            self = .resume(id)
        } else {
            return nil
        }
    }

    var allowedMethods: [String] {
        switch self {
        case .download: ["DELETE"]
        case .pause, .resume: ["POST"]
        }
    }
}

/// `/admin/*`: pause, resume and remove any download. Authorised before the route or the id is
/// looked at (nothing tells which ids exist): no credentials `401` with `WWW-Authenticate`, wrong
/// ones `403`.
extension DownloadAPI {
    func admin(_ request: Request) async -> Response {
        switch access.adminAccess(authorization: request.headers["Authorization"]) {
        case .allowed: break
        case .missing: return APIError.unauthorized.response
        case .wrong: return APIError(status: 403, .forbidden, "this token may not use /admin (the admin token is needed)").response
        }
        if let cluster, !cluster.isReachable { return Self.databaseUnavailable(cluster).response }
        guard let endpoint = AdminEndpoint(path: request.path) else {
            return APIError.notFound("no resource at \(request.path)").response
        }
        guard endpoint.allowedMethods.contains(request.method) else {
            return APIError.methodNotAllowed(request.method, allow: endpoint.allowedMethods).response
        }
        if let answer = await forwardedAnswer(endpoint, request) { return answer }
        do throws(EngineError) {
            switch endpoint {
            case .pause(let id): return operatorAnswer(try engine.operatorPausing(id: id), id: id, action: "paused")
            case .resume(let id): return operatorAnswer(try engine.operatorResuming(id: id), id: id, action: "resumed")
            case .download(let id):
                guard try engine.removing(id: id) != nil else { return unknownDownloadResponse(id) }
                var body = JSONObject()
                body.append("id", .string(id))
                body.append("state", .string("removed"))
                return .json(body.bytes)
            }
        } catch {
            return await answer(error, request)  // the holder changed since the placement was asked: forwarded
        }
    }

    private func operatorAnswer(_ outcome: OperatorOutcome, id: String, action: String) -> Response {
        switch outcome {
        case .done(let snapshot):
            return .json(SnapshotJSON.object(snapshot).bytes)
        case .unknown:
            return unknownDownloadResponse(id)
        case .invalidState(let snapshot):
            return APIError(status: 409, .invalidState,
                            "download \(id) is \(snapshot.state.rawValue): only an unfinished download can be \(action)").response
        }
    }
}
