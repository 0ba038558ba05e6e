import MiniHTTPServer

/// The service's rendering of the errors the HTTP server answers by itself
/// (`ServerConfiguration.errorRenderer`): the API's JSON error shape (`APIError`) with a code by
/// kind, or by status for a request the server could not read or that came too late.
enum ServerErrorJSON {
    @Sendable
    static func response(_ error: ServerError) -> Response {
        APIError(status: error.status, code: code(error), message: error.reason).response
    }

    static func code(_ error: ServerError) -> String {
        switch error.kind {
        case .invalidRequest, .requestTimeout: code(forStatus: error.status)
        case .handlerFailed, .fileUnavailable: "internal"
        case .tooManyConnections: "too_many_connections"
        case .fileNotFound: "not_found"
        case .fileNotReadable: "forbidden"
        case .rangeNotSatisfiable: "range_not_satisfiable"
        }
    }

    /// The code for a request the server rejected, by status.
    static func code(forStatus status: Int) -> String {
        switch status {
        case 400: "bad_request"
        case 404: "not_found"
        case 408: "request_timeout"
        case 413: "body_too_large"
        case 414: "uri_too_long"
        case 431: "headers_too_large"
        case 500: "internal"
        case 501: "not_implemented"
        case 503: "unavailable"
        case 505: "version_not_supported"
        default: "error"
        }
    }
}
