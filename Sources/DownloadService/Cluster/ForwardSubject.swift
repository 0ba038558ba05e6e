import DownloaderEngine
import MiniHTTPServer

/// The download a request acts on, asked about before acting (`DownloadEngine.placement(…)`): a
/// request held elsewhere is forwarded to its holder. Pure. Only what changes or reads a live
/// download is forwarded: `POST /downloads`, `GET`/`HEAD /downloads/{id}`, `DELETE
/// /downloads/{token}`, the operator's `/admin/downloads/{id}…`, `GET`/`HEAD /fetch`. Lists, progress
/// streams (relayed from the database by every replica), files (in the shared directory) and
/// `/events` are answered where they arrive; so is a body or query that does not parse (its `400`).
enum ForwardSubject {
    /// A download asked for by URL (and caller headers): `POST /downloads`, `/fetch`.
    case request(DownloadRequest)
    case id(String)
    case token(String)

    static func of(_ endpoint: Endpoint, _ request: Request) -> ForwardSubject? {
        switch endpoint {
        case .downloads where request.method == "POST":
            guard case .success(let asked) = CreateDownloadBody.parse(request.body) else { return nil }
            return .request(asked)
        case .download(let idOrToken):
            return request.method == "DELETE" ? .token(idOrToken) : .id(idOrToken)
        case .fetch:
            guard case .success(let query) = FetchQuery.parse(request.query) else { return nil }
            return .request(query.request)
        case .health, .ready, .metrics, .downloads, .progress, .file, .fileLink, .events, .page:
            return nil
        }
    }

    static func of(admin endpoint: AdminEndpoint) -> ForwardSubject {
        switch endpoint {
        case .download(let id), .pause(let id), .resume(let id): .id(id)
        }
    }

    /// Answers relayed as they arrive (a growing file), never buffered whole.
    static func isStreamed(_ endpoint: Endpoint) -> Bool {
        switch endpoint {
        case .fetch, .file: true
        default: false
        }
    }
}
