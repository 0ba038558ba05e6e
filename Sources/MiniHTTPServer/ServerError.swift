/// An error the server answers by itself, without (or instead of) the handler's response.
/// `ServerConfiguration.errorRenderer` turns it into the response the client gets, so the
/// application decides the body's format; the server knows only the status and a short reason.
public struct ServerError: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        /// The request could not be read: malformed, too large or unsupported (400, 413, 414, 431,
        /// 501, 505); the connection closes after the answer.
        case invalidRequest
        /// The request head or body did not arrive in time (408); the connection closes.
        case requestTimeout
        /// The handler threw (500).
        case handlerFailed
        /// The connection was refused: too many open, server-wide or from the client's address
        /// (503, `Retry-After: 1` unless the rendered response sets it; closed at once).
        case tooManyConnections
        /// A `.file` body's file does not exist or is not a regular file (404).
        case fileNotFound
        /// A `.file` body's file is not readable (403).
        case fileNotReadable
        /// A `.file` body's file cannot be opened for another reason (500).
        case fileUnavailable
        /// A `Range` that does not overlap a `.file` body's file (416; the server adds
        /// `Content-Range` and the file's validators).
        case rangeNotSatisfiable
        /// An `If-Match` or `If-Unmodified-Since` a `.file` body's file does not meet (412).
        case preconditionFailed
    }

    public var status: Int
    public var kind: Kind
    /// A short human-readable reason, e.g. `header section too large`.
    public var reason: String

    public init(status: Int, kind: Kind, reason: String) {
        self.status = status
        self.kind = kind
        self.reason = reason
    }

    /// The server's default rendering: the reason as one line of plain text.
    @Sendable
    public static func plainText(_ error: ServerError) -> Response {
        Response(status: error.status, headers: ["Content-Type": "text/plain; charset=utf-8"],
                 body: .bytes(Array("\(error.reason)\n".utf8)))
    }
}
