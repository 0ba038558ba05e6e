import CLinux
import Foundation
import Synchronization

/// The server-wide `ConnectionCounts`, shared by every event loop: the accepting loop admits, the
/// loop that owns a connection releases it when it closes. Refused sockets get a short canned `503`
/// (`ServerError.Kind.tooManyConnections` as the application renders it, encoded once at start-up,
/// with `Retry-After: 1` and `Connection: close`; one non-blocking send, whatever does not fit is
/// dropped) and are closed at once: never a crash, never a blocked loop.
final class ConnectionLimiter: Sendable {
    private let counts: Mutex<ConnectionCounts>
    private let serverFullBytes: [UInt8]
    private let addressFullBytes: [UInt8]

    init(maxConnections: Int, maxConnectionsPerIP: Int?, renderError: (ServerError) -> Response) {
        counts = Mutex(ConnectionCounts(maxConnections: maxConnections, maxConnectionsPerIP: maxConnectionsPerIP))
        serverFullBytes = Self.encode(renderError(ServerError(status: 503, kind: .tooManyConnections, reason: Self.reason(.serverFull))))
        addressFullBytes = Self.encode(renderError(ServerError(status: 503, kind: .tooManyConnections, reason: Self.reason(.addressFull))))
    }

    /// What a refusal tells the client.
    static func reason(_ refusal: ConnectionCounts.Refusal) -> String {
        switch refusal {
        case .serverFull: "the server has too many open connections; retry shortly"
        case .addressFull: "too many open connections from your address; close some and retry"
        }
    }

    /// Counted per client network (`ClientNetwork`: an IPv6 peer by its /64).
    func admit(remote: String) -> ConnectionCounts.Refusal? {
        let network = ClientNetwork.of(ConnectionCounts.ip(ofRemote: remote))
        return counts.withLock { $0.admit(network) }
    }

    func release(remote: String) {
        let network = ClientNetwork.of(ConnectionCounts.ip(ofRemote: remote))
        counts.withLock { $0.release(network) }
    }

    /// The whole refusal, head and body, encoded once.
    func refusalBytes(_ refusal: ConnectionCounts.Refusal) -> [UInt8] {
        switch refusal {
        case .serverFull: return serverFullBytes
        case .addressFull: return addressFullBytes
        }
    }

    /// A refusal's head and body: status line, the rendered fields (minus those the server owns or
    /// unsafe ones), `Content-Length`, `Retry-After` (1 unless rendered) and `Connection: close`.
    /// No `Date`: the bytes are encoded once. Only a `.bytes` body is sent.
    static func encode(_ response: Response) -> [UInt8] {
        var body: [UInt8] = []
        if case .bytes(let bytes) = response.body, !HTTPStatus.forbidsBody(response.status) { body = bytes }
        var head = "HTTP/1.1 \(response.status) \(HTTPStatus.reason(response.status))\r\n"
        var retryAfter = "1"
        for (name, value) in response.headers where !ResponseHeadEncoder.isServerOwned(name)
            && ResponseHeadEncoder.isSafe(name: name, value: value) {
            if name.caseInsensitiveEquals("Retry-After") {
                retryAfter = value
            } else {
                head += "\(name): \(value)\r\n"
            }
        }
        head += "Content-Length: \(body.count)\r\nRetry-After: \(retryAfter)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// Answers a refused, just-accepted socket and closes it (non-blocking throughout). Input the
    /// client already sent is read first (bounded) so that closing does not reset the connection
    /// and destroy the answer.
    func refuse(fd: Int32, _ refusal: ConnectionCounts.Refusal, scratch: UnsafeMutableRawBufferPointer) {
        for _ in 0..<4 {
            guard case .processed(let n)? = try? Socket.read(fd, into: scratch), n > 0 else { break }
        }
        let bytes = refusalBytes(refusal)
        _ = bytes.withUnsafeBytes { try? Socket.send(fd, $0) }
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }
}
