import Foundation
import Synchronization

/// An HTTP/1.1 server on epoll: one event-loop thread owns the listening socket and every
/// connection; handlers run as tasks that prefer the loop as their executor, so a handler that
/// does not suspend answers without any thread hop.
///
/// Layout: `Posix/` (syscall wrapper: EINTR retried, EAGAIN → would-block, `SystemError`; sockets),
/// `EventLoop/` (epoll `Selector` + eventfd wake-up, `EventLoop` thread with a timer heap, a
/// cross-thread queue and the `TaskExecutor` conformance; registration ids guard against fd reuse),
/// `HTTP/` (pure parsers and encoders: request head, chunked bodies, `Range`, conditionals, dates),
/// `Connection/` (the pure `ConnectionStateMachine`, `PendingWrites` with watermarks, and the
/// `Connection` glue: edge-triggered reads, one handler task per busy connection, sendfile, streams,
/// timeouts, lingering close) and `ServerContext` (accepting, bookkeeping, graceful shutdown).
///
/// Limits and timeouts come from `ServerConfiguration`; every error the server itself answers is the
/// JSON shape of `Response.error` with `Connection: close`.
public final class HTTPServer: Sendable {
    public let configuration: ServerConfiguration
    private let handler: HTTPHandler

    private enum State {
        case idle
        case running(EventLoop, ServerContext)
        /// Shutting down; other callers of `shutdown()` wait here.
        case stopping([CheckedContinuation<Void, Never>])
        case stopped
    }

    private let state = Mutex(State.idle)

    public init(configuration: ServerConfiguration, handler: @escaping HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
    }

    /// Binds, starts the event loop and returns the port actually bound (useful with port 0).
    public func start() throws -> Int {
        signal(SIGPIPE, SIG_IGN)
        return try state.withLock { state -> Int in
            guard case .idle = state else { throw SystemError(errno: EALREADY, function: "HTTPServer.start") }
            let loop = try EventLoop()
            let (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port,
                                               backlog: configuration.backlog)
            let context = ServerContext(configuration: configuration, handler: handler, loop: loop, listenerFD: fd)
            loop.start(name: "MiniHTTPServer")
            let registered = DispatchSemaphore(value: 0)
            let failure = Mutex<Error?>(nil)
            loop.execute {
                do { try context.startListening() } catch { failure.withLock { $0 = error } }
                registered.signal()
            }
            registered.wait()
            if let error = failure.withLock({ $0 }) {
                close(fd)
                let done = DispatchSemaphore(value: 0)
                loop.stop { done.signal() }
                done.wait()
                throw error
            }
            state = .running(loop, context)
            return port
        }
    }

    /// Stops accepting, lets in-flight requests finish within `shutdownGracePeriod`, cancels
    /// streams, closes every connection and stops the loop. Returns when all of that is done.
    public func shutdown() async {
        enum Role { case stop(EventLoop, ServerContext), wait, done }
        let role = state.withLock { state -> Role in
            switch state {
            case .running(let loop, let context):
                state = .stopping([])
                return .stop(loop, context)
            case .stopping: return .wait
            case .idle, .stopped: return .done
            }
        }
        switch role {
        case .done:
            return
        case .wait:
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let finished = state.withLock { state -> Bool in
                    guard case .stopping(var waiters) = state else { return true }
                    waiters.append(continuation)
                    state = .stopping(waiters)
                    return false
                }
                if finished { continuation.resume() }
            }
        case .stop(let loop, let context):
            let grace = configuration.shutdownGracePeriod
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                loop.execute {
                    context.shutdown(gracePeriod: grace) {
                        loop.stop { continuation.resume() }
                    }
                }
            }
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                defer { state = .stopped }
                if case .stopping(let waiters) = state { return waiters }
                return []
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}
