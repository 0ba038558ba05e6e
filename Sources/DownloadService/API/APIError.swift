import MiniHTTPServer

/// An error answer of the REST API: a status and the JSON `{"error":{"code","message"}}` body
/// (written without `JSONEncoder`). The HTTP server's own errors get the same shape
/// (`ServerErrorJSON`).
struct APIError: Error, Sendable, Equatable {
    var status: Int
    var code: String
    var message: String
    var headers: [String: String] = [:]

    var response: Response {
        var h = HTTPHeaders()
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { h[name] = value }
        var error = JSONObject()
        error.append("code", .string(code))
        error.append("message", .string(message))
        return .json(status: status, JSONObject(["error": .object(error)]).bytes, headers: h)
    }

    static func badRequest(_ code: String, _ message: String) -> APIError {
        APIError(status: 400, code: code, message: message)
    }

    static func notFound(_ message: String) -> APIError {
        APIError(status: 404, code: "not_found", message: message)
    }

    static func methodNotAllowed(_ method: String, allow: [String]) -> APIError {
        APIError(status: 405, code: "method_not_allowed", message: "\(method) is not allowed here; use \(allow.joined(separator: ", "))",
                 headers: ["Allow": allow.joined(separator: ", ")])
    }

    /// The client address holds `limit` live caller tokens (`--max-downloads-per-client`).
    static func tooManyDownloads(limit: Int) -> APIError {
        APIError(status: 429, code: "too_many_downloads",
                 message: "this client already holds \(limit) live caller tokens; cancel some (DELETE /downloads/{token}) and retry",
                 headers: ["Retry-After": "30"])
    }

    /// The download has `limit` open progress streams (`--max-subscribers-per-download`).
    static func tooManySubscribers(limit: Int) -> APIError {
        APIError(status: 503, code: "too_many_subscribers",
                 message: "this download already has \(limit) open progress streams; retry later",
                 headers: ["Retry-After": "5"])
    }

    static let unauthorized = APIError(status: 401, code: "unauthorized", message: "missing or wrong bearer token",
                                       headers: ["WWW-Authenticate": #"Bearer realm="download-service""#])
}
