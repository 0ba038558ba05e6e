/// Limits the parser enforces, taken from `ServerConfiguration` (`init(_:)` is declared there, so the
/// parser compiles without the rest of the server: scripts/fuzz-parser builds it alone).
struct ParserLimits: Sendable {
    var maxRequestLineBytes = 8 * 1024
    var maxHeaderBytes = 64 * 1024
    var maxHeaderCount = 100
    var maxBodyBytes = 1024 * 1024

    init() {}
}

/// How the request body is delimited.
enum BodyFraming: Equatable, Sendable {
    case none
    case length(Int)
    case chunked
}

/// A rejected request: the status to answer with (always followed by closing) and why.
struct ParseFailure: Error, Equatable, Sendable {
    var status: Int
    var reason: String
}

/// A parsed request line and header section, validated. The `Request` the handler gets is built
/// here once (its body and remote address are filled in later) and moved, never copied, on its way.
struct RequestHead: Sendable {
    var request: Request
    /// Whether the connection may be reused after this request (before the response has its say).
    var keepAlive: Bool
    var framing: BodyFraming
    /// `Expect: 100-continue` was sent.
    var expectsContinue: Bool

    var method: String { request.method }
    var target: String { request.target }
    var version: (major: Int, minor: Int) { request.version }
    var headers: HTTPHeaders { request.headers }
}

/// What the head parser says about the bytes buffered so far.
enum HeadParseResult {
    case needMoreData
    /// A complete head; `consumed` bytes (including leading empty lines and the blank line) are used.
    case head(RequestHead, consumed: Int)
    case invalid(ParseFailure)
}
