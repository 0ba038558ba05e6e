import Foundation
import Glibc

/// A loopback TCP listener (port 0) that misbehaves below HTTP, for tests of what a client does when
/// a server accepts and then never answers, or resets the connection as soon as the client speaks
/// (e.g. in the middle of a TLS handshake). One thread accepts; each connection gets one thread.
/// Always call `stop()`.
final class RawListener: Sendable {
    enum Behaviour: Sendable {
        /// Read whatever comes and never answer, until the client goes or the listener stops.
        case neverAnswer
        /// Read the client's first bytes, then reset the connection (RST).
        case resetAfterFirstBytes
    }

    private let connections: ConnectionThreads
    private let behaviour: Behaviour
    private let received = OriginLock<Int>(0)

    var port: UInt16 { connections.port }

    init(_ behaviour: Behaviour) throws {
        connections = try ConnectionThreads()
        self.behaviour = behaviour
        connections.start { [self] fd in serve(fd) }
    }

    /// Connections accepted so far.
    var connectionCount: Int { connections.accepted }
    /// Bytes received from clients so far.
    var bytesReceived: Int { received.withLock { $0 } }

    private func serve(_ fd: Int32) {
        OriginSocket.setReceiveTimeout(fd, seconds: 1)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while !connections.isStopped {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return }
            guard count > 0 else { continue }  // The 1 s receive timeout: look at `stopped` again.
            received.withLock { $0 += count }
            if case .resetAfterFirstBytes = behaviour {
                OriginSocket.resetOnClose(fd)
                return
            }
        }
    }

    /// Closes the listener and every connection; waits up to 5 s for the threads.
    func stop() { connections.stop() }
}
