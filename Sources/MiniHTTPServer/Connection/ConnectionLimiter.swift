import CLinux
import Foundation
import Synchronization

/// The server-wide `ConnectionCounts`, shared by every event loop: the accepting loop admits, the
/// loop that owns a connection releases it when it closes. Refused sockets get a short canned JSON
/// `503` with `Retry-After: 1` and `Connection: close` (one non-blocking send; whatever does not fit
/// is dropped) and are closed at once: never a crash, never a blocked loop.
final class ConnectionLimiter: Sendable {
    private let counts: Mutex<ConnectionCounts>

    init(maxConnections: Int, maxConnectionsPerIP: Int?) {
        counts = Mutex(ConnectionCounts(maxConnections: maxConnections, maxConnectionsPerIP: maxConnectionsPerIP))
    }

    func admit(remote: String) -> ConnectionCounts.Refusal? {
        let ip = ConnectionCounts.ip(ofRemote: remote)
        return counts.withLock { $0.admit(ip) }
    }

    func release(remote: String) {
        let ip = ConnectionCounts.ip(ofRemote: remote)
        counts.withLock { $0.release(ip) }
    }

    /// The whole refusal, head and body, encoded once.
    static func refusalBytes(_ refusal: ConnectionCounts.Refusal) -> [UInt8] {
        switch refusal {
        case .serverFull: return serverFullBytes
        case .addressFull: return addressFullBytes
        }
    }

    private static let serverFullBytes = encode("the server has too many open connections; retry shortly")
    private static let addressFullBytes = encode("too many open connections from your address; close some and retry")

    private static func encode(_ message: String) -> [UInt8] {
        var body: [UInt8] = []
        if case .bytes(let bytes) = Response.error(status: 503, code: "too_many_connections", message: message).body {
            body = bytes
        }
        let head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n"
            + "Retry-After: 1\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// Answers a refused, just-accepted socket and closes it (non-blocking throughout). Input the
    /// client already sent is read first (bounded) so that closing does not reset the connection
    /// and destroy the answer.
    static func refuse(fd: Int32, _ refusal: ConnectionCounts.Refusal, scratch: UnsafeMutableRawBufferPointer) {
        for _ in 0..<4 {
            guard case .processed(let n)? = try? Socket.read(fd, into: scratch), n > 0 else { break }
        }
        let bytes = refusalBytes(refusal)
        _ = bytes.withUnsafeBytes { try? Socket.send(fd, $0) }
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }
}
