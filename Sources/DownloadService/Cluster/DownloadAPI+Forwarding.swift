import DownloaderEngine
import MiniHTTPServer

/// Cluster forwarding's parts in the API: the forwarder, and where downloads live.
struct Forwarding: Sendable {
    var forwarder = PeerForwarder()
    /// Where a subject's download lives; nil: the engine's `placement(…)`. Tests put their own.
    var placement: (@Sendable (ForwardSubject) -> Placement)? = nil
    /// The client address a forwarded request counts under (nil: the connection's).
    var signing: ClientSigning? = nil
}

// A request for a download another replica holds goes to that replica (auth was checked here
// first; the same tokens hold on every replica and `Authorization` passes on). A request that came
// forwarded is never forwarded again, and a holder that cannot be reached is `503 held_elsewhere`
// with `Retry-After: 1` (its lease lapses and another replica takes the download over).
extension DownloadAPI {
    /// Before acting on `endpoint`: the holder's answer when the download is held elsewhere; nil: act here.
    func forwardedAnswer(_ endpoint: Endpoint, _ request: Request) async -> Response? {
        guard isForwarding, let subject = ForwardSubject.of(endpoint, request) else { return nil }
        return await forwardedAnswer(subject, request, streamed: ForwardSubject.isStreamed(endpoint))
    }

    /// Before acting on an operator's `endpoint`: as above.
    func forwardedAnswer(_ endpoint: AdminEndpoint, _ request: Request) async -> Response? {
        guard isForwarding else { return nil }
        return await forwardedAnswer(ForwardSubject.of(admin: endpoint), request, streamed: false)
    }

    /// An engine error's answer; `heldElsewhere` (the holder changed since the placement was asked)
    /// forwards the request to the holder it names.
    func answer(_ error: EngineError, _ request: Request, streamed: Bool = false) async -> Response {
        guard error.code == .heldElsewhere, let owner = error.ownerURL else { return APIError(engineError: error).response }
        return await forward(request, to: owner, streamed: streamed)
    }

    /// The address `request` comes from: the one the forwarding replica vouched for, else the
    /// connection's.
    func clientAddress(_ request: Request) -> String {
        forwarding.signing?.client(of: request) ?? request.remoteIP
    }

    /// What per-client limits count `request` under: its client address's network
    /// (`ClientNetwork`: a public IPv6 address by its /64, so one host cannot multiply its share).
    func clientNetwork(_ request: Request) -> String {
        ClientNetwork.of(clientAddress(request))
    }

    func placement(of subject: ForwardSubject) -> Placement {
        if let placement = forwarding.placement { return placement(subject) }
        switch subject {
        case .request(let request): return engine.placement(of: request)
        case .id(let id): return engine.placement(ofID: id)
        case .token(let token): return engine.placement(ofToken: token)
        }
    }

    /// How long to wait before asking again, when `answer` (after `tries` tries) is the refusal of a
    /// second hop: the holder the request went to had let the download go (it completed, or paused,
    /// and another replica took it since). Nothing was done there, so this replica, the first hop,
    /// asks again where it lives: five tries in all, 50, 100, 200 and 400 ms apart (the lease table
    /// settles within a commit or two, also on a loaded machine); then the refusal stands. nil: don't.
    func askAgainDelay(_ answer: Response, _ request: Request, tries: Int) -> Duration? {
        guard answer.headers.contains(ForwardedHeaders.hopRefused), !ForwardedHeaders.isForwarded(request.headers),
              (1..<5).contains(tries) else { return nil }
        return .milliseconds(50 << (tries - 1))
    }

    /// A file is served from the shared directory by any replica, once the database's row says it is
    /// complete. Until the holder's row says so (its commits and heartbeat lag by up to a second,
    /// and a completed download stays held a second: `LeaseLinger`), the holder answers. Asked only
    /// when the file is not served here; nil when no other replica holds the download.
    func fileFromHolder(id: String, _ request: Request) async -> Response? {
        guard isForwarding, !ForwardedHeaders.isForwarded(request.headers),
              case .elsewhere(let owner) = placement(of: .id(id)) else { return nil }
        return await forward(request, to: owner, streamed: true)
    }

    /// A single process holds everything: nothing to ask.
    private var isForwarding: Bool { cluster != nil || forwarding.placement != nil }

    private func forwardedAnswer(_ subject: ForwardSubject, _ request: Request, streamed: Bool) async -> Response? {
        guard case .elsewhere(let owner) = placement(of: subject) else { return nil }
        return await forward(request, to: owner, streamed: streamed)
    }

    private func forward(_ request: Request, to owner: String, streamed: Bool) async -> Response {
        let refusal = APIError(engineError: .heldElsewhere(ownerURL: owner)).response
        if ForwardedHeaders.isForwarded(request.headers) {  // never a second hop
            var refused = refusal
            refused.headers[ForwardedHeaders.hopRefused] = "1"
            return refused
        }
        switch await forwarding.forwarder.forward(request, to: owner, streamed: streamed) {
        case .answered(let response): return response
        case .unreachable(let reason):  // Why, for the caller and the operator (no credentials in it).
            return APIError(status: 503, .heldElsewhere, "another replica (\(owner)) holds this download and could not be "
                            + "asked (\(reason)); try again shortly", headers: ["Retry-After": "1"]).response
        }
    }
}
