import DownloaderEngine
import MiniHTTPServer

// Private (credentialed) downloads: only their callers, and the operator, read them (`DownloadAccess`).
extension DownloadAPI {
    /// The download a request reads: `GET`/`HEAD` of its snapshot, progress stream or file.
    static func readDownloadID(_ endpoint: Endpoint, method: String) -> String? {
        switch endpoint {
        case .download(let id): method == "DELETE" ? nil : id
        case .progress(let id), .file(let id), .fileLink(let id): id
        default: nil
        }
    }

    /// nil when `request` may read download `id` (an unknown one: yes, its own `404` follows); else
    /// the answer: a private download is unknown to others, and one whose privacy could not be read
    /// (cluster mode, the database did not answer) is `503`, never served as public.
    func readRefusal(id: String, _ request: Request, endpoint: Endpoint) -> Response? {
        do throws(EngineError) {
            guard try engine.isPrivate(id: id), !access(isPrivate: true, request, id: id, endpoint: endpoint).allowsReading else { return nil }
            return unknownDownloadResponse(id)
        } catch {
            return APIError(engineError: error).response
        }
    }

    /// The one place that says whether a request is the operator's: it shows the admin token
    /// (`--admin-token`; on `/events` and a file also as `?access_token=`, `QueryToken`). Without an admin token no request
    /// is: a shared `--auth-token` does not let one caller read another's private download.
    func isOperator(_ request: Request, endpoint: Endpoint? = nil) -> Bool {
        guard let adminAuth else { return false }
        let presented = endpoint.flatMap { QueryToken.authorization(for: $0, request) } ?? request.headers["Authorization"]
        return adminAuth.allows(authorization: presented)
    }

    func access(isPrivate: Bool, _ request: Request, id: String?, endpoint: Endpoint? = nil) -> DownloadAccess {
        var shows = false
        if isPrivate, let id, let token = callerToken(request) { shows = engine.isCaller(token: token, of: id) }
        return DownloadAccess(isPrivate: isPrivate, showsCallerToken: shows, isOperator: isPrivate && isOperator(request, endpoint: endpoint))
    }

    private func callerToken(_ request: Request) -> String? {
        request.headers[DownloadAccess.tokenHeader]
            ?? request.queryItems.first { $0.name == DownloadAccess.tokenParameter }?.value
    }
}
