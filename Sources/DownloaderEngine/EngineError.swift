/// An error from the engine's API (not a download failure, which is a `DownloadFailure`).
public struct EngineError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Every kind of engine error. The raw values are the wire strings (the API's `error.code`),
    /// written nowhere else; the service maps each to an HTTP status with an exhaustive `switch`
    /// and `openapi.yaml` lists them all (`ErrorCodeContractTests` checks it).
    public enum Code: String, Sendable, CaseIterable {
        case invalidURL = "invalid_url"
        case invalidChecksum = "invalid_sha256"
        case conflict = "conflict"
        case shuttingDown = "shutting_down"
        case tooManyCallers = "too_many_callers"
        case destinationForbidden = "destination_forbidden"
        case urlCredentials = "url_credentials"
        case invalidHeaders = "invalid_headers"
        case heldElsewhere = "held_elsewhere"
        case databaseUnavailable = "database_unavailable"
        case stateUnavailable = "state_unavailable"
        case busy = "busy"
    }

    /// Stable machine-readable code.
    public let code: Code
    /// Human-readable detail.
    public let message: String
    /// `heldElsewhere`: the advertised URL of the replica that holds the download's lease.
    public let ownerURL: String?
    /// The download the refusal is about, when there is one (`conflict`, `tooManyCallers`).
    public private(set) var downloadID: String?

    private init(_ code: Code, _ message: String, ownerURL: String? = nil) {
        self.code = code
        self.message = message
        self.ownerURL = ownerURL
    }

    /// The same refusal, naming download `id`.
    func about(_ id: String) -> EngineError {
        var named = self
        named.downloadID = id
        return named
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The URL is not an absolute `http`/`https` URL with a host.
    public static func invalidURL(_ message: String) -> EngineError { EngineError(.invalidURL, message) }
    /// The `sha256` is not 64 hex digits.
    public static func invalidChecksum(_ message: String) -> EngineError { EngineError(.invalidChecksum, message) }
    /// The request's `sha256`/`size` contradict those of the existing download for that URL.
    public static func conflict(_ message: String) -> EngineError { EngineError(.conflict, message) }
    /// The engine is shutting down and accepts no new work.
    public static func shuttingDown(_ message: String = "the engine is shutting down") -> EngineError {
        EngineError(.shuttingDown, message)
    }

    /// The download already has `EngineConfiguration.maxCallersPerDownload` live caller tokens; try
    /// again once some caller cancels (maps naturally to HTTP 429).
    public static func tooManyCallers(_ message: String) -> EngineError { EngineError(.tooManyCallers, message) }

    /// The SSRF guard refuses the URL's host before any connection (an address literal in a denied
    /// range, a denied name, or a host not on the allow list); maps to HTTP 403. The message names
    /// the rule or range, e.g. "127.0.0.1 is loopback".
    public static func destinationForbidden(_ message: String) -> EngineError { EngineError(.destinationForbidden, message) }

    /// The URL carries `user:password@` and the engine does not accept credentials in URLs.
    public static func urlCredentials(_ message: String) -> EngineError { EngineError(.urlCredentials, message) }

    /// The caller's `headers` break a rule of `CallerHeaders` (the message never holds a value).
    public static func invalidHeaders(_ message: String) -> EngineError { EngineError(.invalidHeaders, message) }

    /// Cluster mode: another replica holds the download's lease (it runs the transfer and owns the
    /// download's state while it does); the request is for `ownerURL`, which the service forwards it
    /// to. Answered `503` (with `Retry-After`) only when the request cannot be forwarded.
    public static func heldElsewhere(ownerURL: String) -> EngineError {
        EngineError(.heldElsewhere, "another replica (\(ownerURL)) holds this download; try again shortly", ownerURL: ownerURL)
    }

    /// Cluster mode: the database could not be reached for what the request needs (a lease, a
    /// download's row); answered `503` with `Retry-After`, as the service answers while it is lost.
    public static func databaseUnavailable(_ message: String = "the cluster database could not be reached; try again shortly")
        -> EngineError {
        EngineError(.databaseUnavailable, message)
    }

    /// The state store could not commit an operator's change (the disk is full or failing): the
    /// change took effect and its commit is retried, but it may not survive a crash until then.
    /// Answered `503` with `Retry-After`; asking again is safe (the operator's actions are idempotent).
    static func stateUnavailable(_ error: StateStoreError, _ what: String) -> EngineError {
        EngineError(.stateUnavailable, "\(what), but the state database could not record it (\(error)); it is retried, ask again shortly")
    }

    /// Work that holds an outbound connection (a `HEAD` probe) is at its limit; answered `503` with
    /// `Retry-After`.
    public static func busy(_ message: String) -> EngineError { EngineError(.busy, message) }

    /// Equal when the codes are (the message is detail).
    public static func == (a: EngineError, b: EngineError) -> Bool { a.code == b.code }
}
