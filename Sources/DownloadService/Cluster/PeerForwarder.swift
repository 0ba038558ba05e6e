import MiniHTTPServer

/// Cluster mode: sends a request to the replica that holds its download (at that replica's
/// advertised URL) and relays the answer: status, fields (minus hop-by-hop ones) and body. Bounded:
/// a connect timeout, a total timeout and a size limit for buffered answers, a stall timeout and a
/// small relay buffer for streamed ones (`/fetch`), and a cap on exchanges running at once (beyond
/// it a request waits its turn, bounded in count and time: `ExchangeSlots`).
final class PeerForwarder: Sendable {
    struct Settings: Sendable {
        /// Seconds to connect to the holder.
        var connectTimeout: Double = 3
        /// Seconds a buffered exchange (anything but `/fetch`) takes at most.
        var answerTimeout: Double = 30
        /// Seconds a streamed exchange goes without a byte from the holder (or without the client
        /// taking any) before it is ended.
        var stallTimeout: Double = 60
        /// Bytes a buffered answer may have.
        var bodyLimit = 4 << 20
        /// Bytes of a streamed answer held here while the client is slower than the holder.
        var relayBuffer = 256 << 10
        /// Exchanges running at once. Each costs a thread (libcurl blocks on it; its stack is
        /// virtual memory, a few pages resident), a descriptor here and a connection on the holder.
        var maxExchanges = 256
        /// Requests waiting for a slot at once, in arrival order (a burst of callers landing on a
        /// replica that does not hold their download); beyond it a request is answered as if the
        /// holder could not be reached (503 `held_elsewhere`, `Retry-After`).
        var maxWaiting = 1_024
        /// Seconds a request waits for a slot at most; then it is answered as above.
        var maxWait: Double = 5
    }

    enum Outcome: Sendable {
        case answered(Response)
        /// The holder could not be reached, or gave no (complete) answer in time.
        case unreachable(String)
    }

    let settings: Settings
    /// This replica's advertised URL, sent as the marker's value (nil: "1").
    let replicaURL: String?
    /// Vouches for the client's address to the holder (nil: not sent).
    let signing: ClientSigning?
    private let slots: ExchangeSlots

    init(replicaURL: String? = nil, settings: Settings = Settings(), signing: ClientSigning? = nil) {
        self.replicaURL = replicaURL
        self.settings = settings
        self.signing = signing
        slots = ExchangeSlots(limit: settings.maxExchanges, queueLimit: settings.maxWaiting, maxWait: settings.maxWait)
    }

    /// Exchanges running now.
    var exchanges: Int { slots.running }
    /// Requests waiting for an exchange slot now.
    var waiting: Int { slots.waiting }

    func forward(_ request: Request, to ownerURL: String, streamed: Bool) async -> Outcome {
        switch await slots.acquire() {
        case nil: break
        case .queueFull?:
            return .unreachable("\(settings.maxExchanges) forwarded requests are running and \(settings.maxWaiting) wait already")
        case .waitedTooLong?:
            return .unreachable("no forwarding slot came free within \(settings.maxWait) s")
        case .cancelled?:
            return .unreachable("cancelled")
        }
        let call = PeerCall(url: ForwardedHeaders.url(ownerURL: ownerURL, target: request.target), method: request.method,
                            fields: ForwardedHeaders.request(request.headers, forwardedBy: replicaURL,
                                                             client: signing?.value(for: request)), body: request.body,
                            mode: streamed ? .streamed(buffer: settings.relayBuffer) : .buffered(limit: settings.bodyLimit),
                            timeouts: .init(connect: settings.connectTimeout, total: settings.answerTimeout,
                                            stall: settings.stallTimeout),
                            http10: request.version.major == 1 && request.version.minor == 0)
        call.start { [slots] in slots.release() }
        switch await call.answer() {
        case .failed(let reason):
            return .unreachable(reason)
        case .answered(let status, let fields, let body):
            return .answered(Self.response(status: status, fields: fields, body: body, method: request.method,
                                           relay: streamed ? call : nil))
        }
    }

    /// The client's answer from the holder's. A HEAD answer keeps the holder's length; a streamed
    /// body keeps its framing (by length when it had one, else chunked).
    static func response(status: Int, fields: [(name: String, value: String)], body: [UInt8], method: String,
                         relay: PeerCall?) -> Response {
        let headers = ForwardedHeaders.response(fields)
        let length = ForwardedHeaders.contentLength(fields)
        if method == "HEAD" {
            return Response(status: status, headers: headers, body: .push(PushBody(length: length, source: HeadOnly())))
        }
        if status == 204 || status == 304 {
            relay?.cancel()
            return Response(status: status, headers: headers, body: .empty)
        }
        guard let relay else { return Response(status: status, headers: headers, body: .bytes(body)) }
        return Response(status: status, headers: headers, body: .push(PushBody(length: length, source: RelayedBody(call: relay))))
    }
}
