import DownloaderEngine
import MiniHTTPServer

/// An error answer of the REST API: a status and the JSON `{"error":{"code","message"}}` body
/// (written without `JSONEncoder`). The HTTP server's own errors get the same shape
/// (`ServerErrorJSON`).
struct APIError: Error, Sendable, Equatable {
    /// The service's own error codes; the raw values are the wire strings, written nowhere else.
    /// An engine error keeps its `EngineError.Code` (see `init(engineError:)`), and MiniHTTPServer
    /// answers some errors itself; `openapi.yaml` lists all three (`ErrorCodeContractTests`).
    enum Code: String, Sendable, CaseIterable {
        case malformedJSON = "malformed_json"
        case invalidBody = "invalid_body"
        case missingURL = "missing_url"
        case invalidStorage = "invalid_storage"
        case invalidSize = "invalid_size"
        case invalidConnections = "invalid_connections"
        case invalidState = "invalid_state"
        case unauthorized = "unauthorized"
        case notFound = "not_found"
        case methodNotAllowed = "method_not_allowed"
        case notComplete = "not_complete"
        case tooManyDownloads = "too_many_downloads"
        case tooManySubscribers = "too_many_subscribers"
        case invalidQuery = "invalid_query"
        /// `/fetch`: the download waits for a transfer slot longer than the reader waits.
        case queued = "queued"
        /// `/fetch`: a bare `Range` on a file that changed at the origin lately.
        case changed = "changed"
        /// `/fetch`: a range that starts beyond the file's end.
        case rangeNotSatisfiable = "range_not_satisfiable"
        case preconditionFailed = "precondition_failed"
        /// `/fetch`: the download's last attempt got no data for the stall timeout.
        case stalled = "stalled"
        /// `POST /downloads`: a `callback` that is not `{"url": http(s) URL, "events"?: [...]}`.
        case invalidCallback = "invalid_callback"
        /// `POST /downloads`: the callback could not be stored (the state database failed).
        case callbackNotRecorded = "callback_not_recorded"
        /// Cluster mode: the database is unreachable (503 with `Retry-After`).
        case databaseUnavailable = "database_unavailable"
        /// A browser sent a request that changes something from another site (`CrossSiteGuard`).
        case crossSite = "cross_site"
        /// A `Host` that is no name of this machine, on loopback without a token (`LoopbackHostGuard`).
        case misdirected = "misdirected"
    }

    var status: Int
    /// The wire string: an `APIError.Code`, `EngineError.Code` or `ServerErrorJSON.Code` raw value.
    let code: String
    var message: String
    var headers: [String: String] = [:]
    /// `WWW-Authenticate` challenges, one header line each.
    var challenges: [String] = []

    init(status: Int, _ code: Code, _ message: String, headers: [String: String] = [:]) {
        self.init(status: status, wireCode: code.rawValue, message, headers: headers)
    }

    /// An engine error's code with a status of the service's choosing (see `init(engineError:)`).
    init(status: Int, _ code: EngineError.Code, _ message: String, headers: [String: String] = [:]) {
        self.init(status: status, wireCode: code.rawValue, message, headers: headers)
    }

    /// A download's failure code for what keeps it from going on (`/fetch`: `disk_full` while it waits for space).
    init(status: Int, _ code: DownloadFailure.Code, _ message: String, headers: [String: String] = [:]) {
        self.init(status: status, wireCode: code.rawValue, message, headers: headers)
    }

    /// An error the HTTP server answers by itself (`ServerErrorJSON`).
    init(status: Int, _ code: ServerErrorJSON.Code, _ message: String) {
        self.init(status: status, wireCode: code.rawValue, message, headers: [:])
    }

    private init(status: Int, wireCode: String, _ message: String, headers: [String: String]) {
        self.status = status
        self.code = wireCode
        self.message = message
        self.headers = headers
    }

    var response: Response {
        var h = HTTPHeaders()
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { h[name] = value }
        for challenge in challenges { h.add("WWW-Authenticate", challenge) }
        var error = JSONObject()
        error.append("code", .string(code))
        error.append("message", .string(message))
        return .json(status: status, JSONObject(["error": .object(error)]).bytes, headers: h)
    }

    static func badRequest(_ code: Code, _ message: String) -> APIError {
        APIError(status: 400, code, message)
    }

    /// A malformed body field that the engine would refuse with the same code (`invalid_url`, `invalid_sha256`).
    static func badRequest(_ code: EngineError.Code, _ message: String) -> APIError {
        APIError(status: 400, code, message)
    }

    static func notFound(_ message: String) -> APIError {
        APIError(status: 404, .notFound, message)
    }

    static func methodNotAllowed(_ method: String, allow: [String]) -> APIError {
        APIError(status: 405, .methodNotAllowed, "\(method) is not allowed here; use \(allow.joined(separator: ", "))",
                 headers: ["Allow": allow.joined(separator: ", ")])
    }

    /// The client address holds `limit` live caller tokens (`--max-downloads-per-client`).
    static func tooManyDownloads(limit: Int) -> APIError {
        APIError(status: 429, .tooManyDownloads,
                 "this client already holds \(limit) live caller tokens; cancel some (DELETE /downloads/{token}) and retry",
                 headers: ["Retry-After": "30"])
    }

    /// The download has `limit` open progress streams (`--max-subscribers-per-download`).
    static func tooManySubscribers(limit: Int) -> APIError {
        APIError(status: 503, .tooManySubscribers,
                 "this download already has \(limit) open progress streams; retry later",
                 headers: ["Retry-After": "5"])
    }

    /// Both ways to present the token are offered: a bearer token, or the password of Basic auth
    /// (for tools that cannot send a bearer header; wget sends Basic credentials only when challenged).
    static let unauthorized: APIError = {
        var error = APIError(status: 401, .unauthorized, "a token is required (a bearer token, or the password of Basic auth)")
        error.challenges = [#"Bearer realm="download-service""#, #"Basic realm="download-service""#]
        return error
    }()
}
