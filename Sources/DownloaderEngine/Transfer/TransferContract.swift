import Foundation
import Synchronization

// The seam between the engine core (decides) and the libcurl transfer layer (acts).
// The engine asks for one attempt at a time; every decision about Range/If-Range, 200 vs 206,
// non-2xx answers and where bytes go is the engine's, made in `didReceive(head:)`.

/// One attempt to fetch a URL.
struct TransferRequest: Sendable {
    enum Method: Sendable { case get, head }

    var url: String
    /// Extra request headers, e.g. `Range: bytes=N-` and `If-Range: "etag"`. Never caller credentials.
    var headers: [(name: String, value: String)]
    /// Seconds to connect: name lookup, TCP, TLS, a proxy's CONNECT (`.connectTimeout`).
    var connectTimeout: Double
    /// Seconds from sending the request to the end of its response head, in total (`.headTimeout`).
    var headTimeout: Double = 30
    /// Seconds without a body byte, once the final head arrived, before the attempt fails with `.stalled`.
    var stallTimeout: Double
    /// Body bytes per second each window of `stallTimeout` must bring, else `.stalled` too; 0: none.
    /// Shared by the connections of one attempt (`speedShare`): each must bring its part.
    var minSpeed: Int64 = 0
    var speedShare: SpeedShare? = nil
    /// Open a new connection, not a cached one (the last attempt stalled or was too slow).
    var freshConnection = false
    /// Largest 2xx body accepted for this attempt (bytes of this response, not counting kept bytes).
    /// Applies to accepted bodies only: a non-2xx head reaches the delegate whatever its
    /// Content-Length (its body is never written anyway).
    var maxBodyBytes: Int64?
    var maxRedirects: Int
    var allowPrivateNetworks: Bool
    var userAgent: String
    /// `.head` asks for the head only (no body follows).
    var method: Method = .get
    /// The caller's headers for a private origin (`CallerHeaders`): sent to hops with the request
    /// URL's scheme, host and port only. With any, the transfer follows redirects itself (libcurl
    /// would send custom headers other than `Authorization` and `Cookie` to every hop).
    var credentials: [(name: String, value: String)] = []
}

/// The final hop's response head (after redirects), given before any body byte is written.
struct ResponseHead: Sendable, Equatable {
    var status: Int
    /// Header fields of the final hop only, names lower-cased, in wire order.
    var headers: [String: [String]]
    /// The URL that answered (after redirects).
    var effectiveURL: String

    init(status: Int, headers: [String: [String]], effectiveURL: String) {
        self.status = status
        self.headers = headers
        self.effectiveURL = effectiveURL
    }

    /// The first value of `name` (any case).
    func value(_ name: String) -> String? { headers[name.lowercased()]?.first }

    /// `Content-Length` as a number (nil: none, or not a number).
    var contentLength: Int64? { value("content-length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } }
}

/// Where the transfer writes body bytes. Called on the transfer thread only.
protocol BodySink: AnyObject {
    /// Writes `bytes` fully or throws (e.g. ENOSPC); a throw fails the attempt with `.disk`.
    func write(_ bytes: UnsafeRawBufferPointer) throws
    /// Between writes, each time the transfer loop looks (at least every second): a chance to act on
    /// bytes held back (e.g. hand them to readers). Returns the seconds until it wants to be asked
    /// again, nil when nothing waits.
    func idle() -> Double?
}

extension BodySink {
    func idle() -> Double? { nil }
}


/// How an attempt ended badly.
struct TransferFailure: Error, Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// DNS, refused, reset (also during a TLS handshake), dropped mid-body, a proxy that cannot
        /// reach the origin.
        case connection
        /// Connecting (name lookup, TCP, TLS handshake, a proxy's CONNECT) took longer than `connectTimeout`.
        case connectTimeout
        /// The response head did not end within `headTimeout` after the request was sent.
        case headTimeout
        /// The peer's certificate does not verify (unknown CA, expired, not yet valid, wrong name).
        case tlsCertificate
        /// The TLS handshake failed for a lasting reason: a fatal alert, a version or cipher refused.
        case tlsHandshake
        /// Body bytes arrived after the end its `Content-Length` announced.
        case contentLengthMismatch
        /// The upstream proxy answered `CONNECT` with 407.
        case proxyAuth
        /// The upstream proxy answered `CONNECT` with a final 4xx other than 407.
        case proxyRefused
        /// No bytes for `stallTimeout`.
        case stalled
        /// Body larger than `maxBodyBytes`.
        case tooLarge
        /// The destination is refused by the SSRF guard (`EgressRules`): a denied or non-public
        /// address at connect time, or a redirect hop to a denied or not allow-listed host. The
        /// message says which rule or range, e.g. "127.0.0.1 is loopback".
        case blockedAddress
        /// The response heads (all redirect hops together) exceed the driver's header budget.
        case headerTooLarge
        /// The answer breaks HTTP's framing or syntax (`DownloadFailure.Code.badResponse`).
        case badResponse
        case tooManyRedirects
        /// A redirect pointed at a scheme other than http/https (e.g. `ftp://`): final, not retried.
        case unsupportedRedirect
        /// Writing to the sink failed; `errno` carried in `code`.
        case disk
        /// The engine aborted the attempt from `didReceive(head:)` (status or policy).
        case rejected
        /// `TransferHandle.cancel()` was called.
        case cancelled
    }

    var kind: Kind
    var message: String
    /// An errno for `.disk`, a libcurl code for others, when there is one.
    var code: Int32?

    init(_ kind: Kind, _ message: String, code: Int32? = nil) {
        self.kind = kind
        self.message = message
        self.code = code
    }
}

/// What a finished attempt delivered.
struct TransferSummary: Sendable, Equatable {
    var head: ResponseHead
    /// Body bytes written to the sink by this attempt.
    var bodyBytes: Int64
}

/// Receives one attempt's head and outcome. Calls come from the transfer thread.
protocol TransferDelegate: AnyObject, Sendable {
    /// The final hop's head, before any body byte. Return the sink for the body, or a failure
    /// (kind `.rejected`) to abort the attempt without reading the body.
    func transfer(didReceive head: ResponseHead) -> Result<BodySink, TransferFailure>
    /// Exactly once per attempt, after the last byte was written (or on failure/cancel).
    func transfer(didFinishWith result: Result<TransferSummary, TransferFailure>)
}

/// A running attempt.
protocol TransferHandle: Sendable {
    /// Stops the attempt; `didFinishWith(.failure(.cancelled))` follows unless it already finished.
    func cancel()
}

/// Starts attempts. The libcurl driver is the real one; tests may inject another.
protocol TransferStarting: Sendable {
    func start(_ request: TransferRequest, delegate: TransferDelegate) -> TransferHandle
}

/// How many connections one attempt's `minSpeed` is shared by (a segmented fetch's crew counts
/// them as they open and end); 1 on a single connection.
final class SpeedShare: Sendable {
    private let count = Atomic<Int>(1)

    var connections: Int { count.load(ordering: .relaxed) }

    func set(_ connections: Int) {
        count.store(max(1, connections), ordering: .relaxed)
    }
}
