import Foundation
import Glibc

/// A loopback TCP listener (port 0) for test servers written with plain blocking sockets: one thread
/// accepts, each connection gets a thread of its own running `serve`, and `stop()` shuts the listener
/// and every open connection down. Always call `stop()`.
final class ConnectionThreads: Sendable {
    let port: UInt16
    private let listener: Int32
    private let state = OriginLock<(accepted: Int, open: Set<Int32>, stopped: Bool)>((0, [], false))
    private let threads = DispatchGroup()

    init() throws {
        (listener, port) = try OriginSocket.listenOnLoopback()
    }

    /// Starts accepting; `serve` runs on the connection's thread, which closes the descriptor after it.
    func start(_ serve: @escaping @Sendable (Int32) -> Void) {
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
    var accepted: Int { state.withLock { $0.accepted } }
    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Closes the listener and every connection, runs `unblock` (for threads waiting on something
    /// else than their socket), then waits up to 5 s for the threads. Later calls do nothing.
    func stop(unblock: () -> Void = {}) {
        let first = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.stopped = true
            _ = shutdown(listener, Int32(SHUT_RDWR))
            for fd in s.open { _ = shutdown(fd, Int32(SHUT_RDWR)) }
            return true
        }
        unblock()
        if first { _ = threads.wait(timeout: .now() + 5) }
    }
}
