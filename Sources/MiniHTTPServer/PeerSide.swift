import Synchronization

/// Whether the client shut down its sending side of the connection (EPOLLRDHUP) while its request
/// is answered: readable from the handler's thread (`Request.peerSide`).
///
/// HTTP/1.1 lets a client send its request, shut down writing and still wait for the answer, so
/// the server keeps answering. But a client that closes the connection (an interrupted `curl`)
/// sends the same FIN, and until something is written it cannot be told apart: a handler that
/// waits a long time for something before it answers (`/fetch` waiting for the origin) may take
/// it as the client leaving, as nginx does for a request it proxies.
public final class PeerSide: Sendable {
    private let shut = Atomic<Bool>(false)

    public init() {}

    public var hasShutDown: Bool { shut.load(ordering: .relaxed) }

    func shutDown() { shut.store(true, ordering: .relaxed) }
}
