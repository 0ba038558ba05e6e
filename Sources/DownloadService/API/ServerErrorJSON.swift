import MiniHTTPServer

/// The service's rendering of the errors the HTTP server answers by itself
/// (`ServerConfiguration.errorRenderer`): the API's JSON error shape (`APIError`) with a code by
/// kind, or by status for a request the server could not read or that came too late.
enum ServerErrorJSON {
    /// The codes of the server's own answers; the raw values are the wire strings.
    enum Code: String, Sendable, CaseIterable {
        case badRequest = "bad_request"
        case notFound = "not_found"
        case forbidden = "forbidden"
        case requestTimeout = "request_timeout"
        case bodyTooLarge = "body_too_large"
        case uriTooLong = "uri_too_long"
        case rangeNotSatisfiable = "range_not_satisfiable"
        case preconditionFailed = "precondition_failed"
        case headersTooLarge = "headers_too_large"
        case `internal` = "internal"
        case notImplemented = "not_implemented"
        case unavailable = "unavailable"
        case tooManyConnections = "too_many_connections"
        case versionNotSupported = "version_not_supported"
        /// A status the table does not name.
        case error = "error"
    }

    @Sendable
    static func response(_ error: ServerError) -> Response {
        APIError(status: error.status, code(error), error.reason).response
    }

    static func code(_ error: ServerError) -> Code {
        switch error.kind {
        case .invalidRequest, .requestTimeout: code(forStatus: error.status)
        case .handlerFailed, .fileUnavailable: .internal
        case .tooManyConnections: .tooManyConnections
        case .fileNotFound: .notFound
        case .fileNotReadable: .forbidden
        case .rangeNotSatisfiable: .rangeNotSatisfiable
        case .preconditionFailed: .preconditionFailed
        }
    }

    /// The code for a request the server rejected, by status.
    static func code(forStatus status: Int) -> Code {
        switch status {
        case 400: .badRequest
        case 404: .notFound
        case 408: .requestTimeout
        case 413: .bodyTooLarge
        case 414: .uriTooLong
        case 431: .headersTooLarge
        case 500: .internal
        case 501: .notImplemented
        case 503: .unavailable
        case 505: .versionNotSupported
        default: .error
        }
    }
}
