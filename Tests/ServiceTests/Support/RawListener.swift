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

    let port: UInt16
    private let listener: Int32
    private let behaviour: Behaviour
    private let state = OriginLock<(accepted: Int, received: Int, open: Set<Int32>, stopped: Bool)>((0, 0, [], false))
    private let threads = DispatchGroup()

    init(_ behaviour: Behaviour) throws {
        (listener, port) = try OriginSocket.listenOnLoopback()
        self.behaviour = behaviour
        threads.enter()
        Thread.detachNewThread { [self] in
            while let fd = OriginSocket.accept(listener) {
                let admitted = state.withLock { s -> Bool in
                    guard !s.stopped else { return false }
                    s.accepted += 1
                    s.open.insert(fd)
                    return true
                }
                guard admitted else { close(fd); break }
                threads.enter()
                Thread.detachNewThread { [self] in
                    serve(fd)
                    state.withLock { _ = $0.open.remove(fd) }
                    close(fd)
                    threads.leave()
                }
            }
            close(listener)
            threads.leave()
        }
    }

    /// Connections accepted so far.
    var connectionCount: Int { state.withLock { $0.accepted } }
    /// Bytes received from clients so far.
    var bytesReceived: Int { state.withLock { $0.received } }

    private func serve(_ fd: Int32) {
        OriginSocket.setReceiveTimeout(fd, seconds: 1)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while !state.withLock({ $0.stopped }) {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return }
            guard count > 0 else { continue }  // The 1 s receive timeout: look at `stopped` again.
            state.withLock { $0.received += count }
            if case .resetAfterFirstBytes = behaviour {
                OriginSocket.resetOnClose(fd)
                return
            }
        }
    }

    /// Closes the listener and every connection; waits up to 5 s for the threads.
    func stop() {
        let first = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.stopped = true
            _ = shutdown(listener, Int32(SHUT_RDWR))
            for fd in s.open { _ = shutdown(fd, Int32(SHUT_RDWR)) }
            return true
        }
        if first { _ = threads.wait(timeout: .now() + 5) }
    }
}
