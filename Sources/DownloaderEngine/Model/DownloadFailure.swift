/// Why a download failed, as shown to callers.
public struct DownloadFailure: Sendable, Equatable {
    /// Every way a download can fail. The raw values are the wire strings (the API's `error.code`,
    /// the state store's `error_code`), written nowhere else; `openapi.yaml` lists them all
    /// (`ErrorCodeContractTests` checks it).
    public enum Code: String, Sendable, CaseIterable {
        /// The origin answered with a final status (not 2xx, 408, 429 or 5xx); `httpStatus` says which.
        case httpError = "http_error"
        /// Every attempt allowed failed with something worth retrying (a 5xx, 408 or 429, a
        /// connection error, a stall); `httpStatus` is the last answer's status, if any. When the last
        /// attempt timed out, the code says which timeout instead (`connectTimeout`, `headTimeout`).
        case retriesExhausted = "retries_exhausted"
        /// Every attempt allowed failed, the last one because connecting (name lookup, TCP, TLS, a
        /// proxy's CONNECT) took longer than the connect timeout.
        case connectTimeout = "connect_timeout"
        /// Every attempt allowed failed, the last one because the response head did not arrive
        /// within the head timeout after the request was sent.
        case headTimeout = "head_timeout"
        /// The origin's certificate does not verify (unknown CA, expired or not yet valid, name
        /// mismatch): not retried. The message names the host and the verifier's reason.
        case tlsCertificate = "tls_certificate"
        /// The TLS handshake failed for another lasting reason (protocol version or cipher refused, a
        /// fatal alert): not retried. The message names the host and the reason.
        case tlsHandshake = "tls_handshake"
        /// The origin sent more body bytes than its `Content-Length` announced: not retried, nothing kept.
        case contentLengthMismatch = "content_length_mismatch"
        /// The upstream proxy answered 407: its credentials (in `--upstream-proxy`) are missing or wrong.
        case proxyAuth = "proxy_auth"
        /// The upstream proxy refused to open a tunnel to the origin (its answer to `CONNECT` was a
        /// final 4xx other than 407, e.g. 403 for a port it does not tunnel to).
        case proxyRefused = "proxy_refused"
        /// No space left on the device.
        case diskFull = "disk_full"
        /// Writing the file failed for another reason (the message says which).
        case diskError = "disk_error"
        /// The body's SHA-256 is not the one the request asked for.
        case checksumMismatch = "checksum_mismatch"
        /// The body's size is not the one the request asked for, or not the one the origin announced.
        case sizeMismatch = "size_mismatch"
        /// The file is over the configured maximum file size.
        case tooLarge = "too_large"
        /// The SSRF guard refused the address connected to or a redirect hop.
        case destinationForbidden = "destination_forbidden"
        /// The response heads, all redirect hops together, are over the configured limit.
        case headerTooLarge = "header_too_large"
        /// The origin's answer cannot be read as HTTP allows (a malformed or conflicting
        /// Content-Length, an unusable Location, a body before any head): not retried.
        case badResponse = "bad_response"
        /// The origin redirected too many times.
        case tooManyRedirects = "too_many_redirects"
        /// The origin redirected to a scheme other than http or https.
        case unsupportedRedirect = "unsupported_redirect"
        /// The transfer was cancelled from outside the engine (`RetryPolicy.classify`'s verdict; the
        /// engine currently retries such an attempt instead).
        case cancelled = "cancelled"
        /// A code this build does not know, read from a state store that another (newer) build wrote.
        /// The journal keeps the original string (see `journalCode`); callers see `unknown`.
        case unknown = "unknown"
    }

    /// Stable machine-readable code.
    public var code: Code {
        didSet { unrecognizedCode = nil }
    }
    public var message: String
    /// The origin's status when the failure came from an HTTP answer.
    public var httpStatus: Int?
    /// The stored code string when this build does not know it (`code` is then `.unknown`).
    private var unrecognizedCode: String?

    public init(code: Code, message: String, httpStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
    }

    /// From a stored code string (the state store's, or an imported journal's). A string this build
    /// does not know never fails the load: it becomes `.unknown` and is kept, so writing the
    /// download back stores it unchanged.
    init(journalCode: String, message: String, httpStatus: Int?) {
        let known = Code(rawValue: journalCode)
        self.code = known ?? .unknown
        self.message = message
        self.httpStatus = httpStatus
        unrecognizedCode = known == nil ? journalCode : nil
    }

    /// The code string the state store keeps: the raw value, or the unrecognised string as it was read.
    var journalCode: String { unrecognizedCode ?? code.rawValue }
}

// The Codable form (`DownloadSnapshot`'s): `{"code", "message", "httpStatus"?}` with the stored
// code string, exactly as the synthesised conformance of the former `code: String` wrote and read it.
extension DownloadFailure: Codable {
    private enum CodingKeys: String, CodingKey {
        case code, message, httpStatus
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(journalCode: try c.decode(String.self, forKey: .code), message: try c.decode(String.self, forKey: .message),
                  httpStatus: try c.decodeIfPresent(Int.self, forKey: .httpStatus))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(journalCode, forKey: .code)
        try c.encode(message, forKey: .message)
        try c.encodeIfPresent(httpStatus, forKey: .httpStatus)
    }
}
