import Basics
import Foundation
import Synchronization

/// An HTTP/1.1 server on epoll: `ServerConfiguration.eventLoopCount` event-loop threads, each
/// owning the connections handed to it (the first loop also owns the listening socket and hands new
/// connections out round-robin); handlers run on a few worker tasks per loop that prefer the loop as
/// their executor, so a handler that does not suspend answers without any thread hop, and a batch
/// of requests costs one task resumption (a handler that suspends keeps its worker to itself).
/// `bulkLoopCount` more loops, at a lower priority, write long bodies: after the handler answered,
/// a connection whose response is a push-fed body or a large file moves to one of them for that
/// response and comes back for its next request (`BulkPolicy`, `ConnectionHandover`).
///
/// Layout: `Posix/` (sockets, over the `Basics` module's syscall wrapper and `SystemError`),
/// `EventLoop/` (epoll `Selector` + eventfd wake-up, `EventLoop` thread with a timer heap, a
/// cross-thread queue and the `TaskExecutor` conformance; registration ids guard against fd reuse;
/// `ThreadNice` lowers the loop threads' CPU priority when `loopThreadNice` asks),
/// `HTTP/` (pure parsers and encoders: request head, chunked bodies, `Range`, conditionals; dates
/// come from `Basics.HTTPDate`), `Connection/` (the pure `ConnectionStateMachine`, `PendingWrites`
/// with watermarks, and the `Connection` glue: edge-triggered reads, `HandlerWorkers` running the
/// handlers, sendfile, streams, timeouts, lingering close) and `ServerContext` (one per loop:
/// accepting, bookkeeping, graceful shutdown).
///
/// Limits and timeouts come from `ServerConfiguration`; every error the server answers by itself is a
/// `ServerError` that `ServerConfiguration.errorRenderer` turns into the response (plain text by
/// default; the application decides the format).
public final class HTTPServer: Sendable {
    public let configuration: ServerConfiguration
    private let handler: HTTPHandler

    private enum State {
        case idle
        /// `bind()` opened the listening socket; nothing is served until `start()`.
        case bound(fd: Int32, port: Int)
        /// One context per loop; `contexts[0]` owns the listening socket.
        case running([ServerContext])
        /// Shutting down; other callers of `shutdown()` wait here.
        case stopping([CheckedContinuation<Void, Never>])
        case stopped
    }

    private let state = Mutex(State.idle)

    public init(configuration: ServerConfiguration, handler: @escaping HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
    }

    /// Opens the listening socket now and returns the port actually bound, without serving:
    /// connections wait in its backlog until `start()`. For an application that must know its port
    /// (with port 0) before it is ready to answer.
    public func bind() throws -> Int {
        try state.withLock { state -> Int in
            guard case .idle = state else { throw SystemError(errno: EALREADY, function: "HTTPServer.bind") }
            let (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port, backlog: configuration.backlog)
            state = .bound(fd: fd, port: port)
            return port
        }
    }

    /// Binds (unless `bind()` did), starts the event loops and returns the port actually bound
    /// (useful with port 0).
    public func start() throws -> Int {
        signal(SIGPIPE, SIG_IGN)
        return try state.withLock { state -> Int in
            let fd: Int32, port: Int
            switch state {
            case .idle:
                (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port, backlog: configuration.backlog)
            case .bound(let boundFD, let boundPort):
                (fd, port) = (boundFD, boundPort)
            default:
                throw SystemError(errno: EALREADY, function: "HTTPServer.start")
            }
            let count = max(1, configuration.eventLoopCount)
            let bulkCount = max(0, configuration.bulkLoopCount)
            var loops: [EventLoop] = []
            do {
                for _ in 0..<(count + bulkCount) { loops.append(try EventLoop(diagnostics: configuration.diagnostics)) }
            } catch {
                close(fd)
                state = .idle
                throw error
            }
            let limiter = ConnectionLimiter(maxConnections: configuration.maxConnections,
                                            maxConnectionsPerIP: configuration.maxConnectionsPerIP,
                                            renderError: configuration.errorRenderer)
            let contexts = loops.enumerated().map { index, loop in
                ServerContext(configuration: configuration, handler: handler, loop: loop,
                              listenerFD: index == 0 ? fd : -1, limiter: limiter)
            }
            // The first `count` contexts accept and answer; the rest are bulk loops (`BulkPolicy`).
            let bulk = Array(contexts[count...])
            if count > 1 { contexts[0].acceptTargets = Array(contexts[..<count]) }
            for context in contexts[..<count] { context.bulkTargets = bulk }
            let handovers = HandoverGate()
            for context in contexts { context.handovers = handovers }
            let bulkNice = max(ThreadNice.clamped(configuration.bulkLoopNice), configuration.loopThreadNice)
            for (index, loop) in loops.enumerated() {
                if index < count {
                    loop.start(name: count == 1 ? "MiniHTTPServer" : "MiniHTTPServer-\(index)",
                               nice: configuration.loopThreadNice)
                } else {
                    loop.start(name: "MiniHTTPServer-bulk-\(index - count)", nice: bulkNice,
                               yield: configuration.bulkLoopYield)
                }
            }
            // Start the other contexts first, so the first accepted connection finds its loop ready.
            var failure: Error?
            for context in contexts.reversed() where failure == nil {
                failure = Self.runAndWait(on: context.loop) { try context.start() }
            }
            if let failure {
                close(fd)
                state = .idle
                for loop in loops {
                    let done = DispatchSemaphore(value: 0)
                    loop.stop { done.signal() }
                    done.wait()
                }
                throw failure
            }
            state = .running(contexts)
            return port
        }
    }

    /// The pthread ids of the running (accepting and answering) event loops, in loop order (empty
    /// when not running); for tests that check which loop served a connection.
    var eventLoopThreadIDs: [UInt] {
        loops(bulk: false).map { $0.threadID }
    }

    /// The kernel thread ids of the running (accepting and answering) event loops, in loop order
    /// (empty when not running); for tests that check the loops' priority.
    var eventLoopKernelThreadIDs: [Int32] {
        loops(bulk: false).map { $0.kernelThreadID }
    }

    /// The kernel thread ids of the running bulk loops (`bulkLoopCount`), in loop order.
    var bulkLoopKernelThreadIDs: [Int32] {
        loops(bulk: true).map { $0.kernelThreadID }
    }

    /// The pthread ids of the running bulk loops, in loop order.
    var bulkLoopThreadIDs: [UInt] {
        loops(bulk: true).map { $0.threadID }
    }

    /// The running loops, answering or bulk (not private: tests stop one on its own).
    func loops(bulk: Bool) -> [EventLoop] {
        state.withLock { state in
            guard case .running(let contexts) = state else { return [] }
            let count = max(1, configuration.eventLoopCount)
            return (bulk ? Array(contexts[count...]) : Array(contexts[..<count])).map { $0.loop }
        }
    }

    /// Runs `body` on `loop`'s thread and waits for it; returns the error it threw, if any.
    private static func runAndWait(on loop: EventLoop, _ body: @escaping @Sendable () throws -> Void) -> Error? {
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<Error?>(nil)
        loop.execute {
            do { try body() } catch { failure.withLock { $0 = error } }
            finished.signal()
        }
        finished.wait()
        return failure.withLock { $0 }
    }

    /// Stops accepting, lets in-flight requests finish within `shutdownGracePeriod`, cancels
    /// streams, closes every connection and stops the loop. Returns when all of that is done.
    public func shutdown() async {
        enum Role { case stop([ServerContext]), wait, done }
        let role = state.withLock { state -> Role in
            switch state {
            case .running(let contexts):
                state = .stopping([])
                return .stop(contexts)
            case .stopping: return .wait
            case .bound(let fd, _):
                close(fd)
                state = .stopped
                return .done
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
        case .stop(let contexts):
            let grace = configuration.shutdownGracePeriod
            // Close the listener first: every connection already handed to another loop is then
            // queued on that loop ahead of its shutdown.
            let acceptor = contexts[0]
            // No connection moves between loops from now on (a loop may stop before another).
            acceptor.handovers.close()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                acceptor.loop.execute {
                    acceptor.stopAccepting()
                    continuation.resume()
                }
            }
            await withTaskGroup(of: Void.self) { group in
                for context in contexts {
                    group.addTask {
                        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                            context.loop.execute {
                                context.shutdown(gracePeriod: grace) {
                                    context.loop.stop { continuation.resume() }
                                }
                            }
                        }
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
