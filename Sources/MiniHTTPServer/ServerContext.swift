import Basics
import CLinux
import Foundation

/// One event loop's share of the server, touched only on that loop's thread: the connections it
/// owns and, for the accepting loop, the listening socket. With several loops the accepting context
/// hands each new connection round-robin to a context (`acceptTargets`), whose loop then owns it.
final class ServerContext: Selectable, @unchecked Sendable {
    let configuration: ServerConfiguration
    let handler: HTTPHandler
    let limits: ParserLimits
    let loop: EventLoop
    /// The listening socket; -1 for contexts that only own handed-over connections.
    let listenerFD: Int32
    /// Contexts new connections go to, round-robin (the accepting context, set before its loop
    /// starts; empty: every connection stays on this loop).
    var acceptTargets: [ServerContext] = []
    /// Bulk-loop contexts that long response bodies move to, round-robin (`BulkPolicy`; set before
    /// the loops start; empty: nothing moves, e.g. on a bulk loop itself).
    var bulkTargets: [ServerContext] = []
    /// Whether connections may still move between loops (one gate for all of a server's contexts,
    /// set before the loops start).
    var handovers = HandoverGate()
    @exclusivity(unchecked)
    private var nextBulk = 0
    /// `ServerConfiguration.bulkMinimumBodyBytes`.
    let bulkMinimumBodyBytes: Int64
    // @exclusivity(unchecked) on the vars below: loop-thread only, no overlapping access; skips the runtime exclusivity check per access.
    @exclusivity(unchecked)
    private var nextTarget = 0
    // Hot-path copies of configuration values (nanoseconds), so connections never copy the struct.
    let idleTimeout: UInt64
    let headerTimeout: UInt64
    let bodyTimeout: UInt64
    let writeTimeout: UInt64
    let accessLog: (@Sendable (AccessLogEntry) -> Void)?
    let diagnostics: @Sendable (String) -> Void
    /// Running out of descriptors was reported and no accept succeeded since (loop thread).
    var warnedOutOfDescriptors = false
    private let errorRenderer: @Sendable (ServerError) -> Response
    @exclusivity(unchecked)
    private(set) var draining = false
    @exclusivity(unchecked)
    private var listening = false
    @exclusivity(unchecked)
    private var listenerClosed = false
    @exclusivity(unchecked)
    private var connections: [ObjectIdentifier: Connection] = [:]
    /// The connections admitted beyond the limits (by the accepting loop, which keeps them), oldest
    /// first: at most `probeConnectionsBeyondLimit`, counted here and not by the limiter.
    @exclusivity(unchecked)
    private var beyondLimitConnections: [Connection] = []
    @exclusivity(unchecked)
    private var onDrained: (() -> Void)?

    static let connectionEvents = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue

    /// Open-connection limits shared by every context of the server.
    let limiter: ConnectionLimiter
    /// The tasks that run this loop's handlers.
    let workers: HandlerWorkers

    init(configuration: ServerConfiguration, handler: @escaping HTTPHandler, loop: EventLoop, listenerFD: Int32,
         limiter: ConnectionLimiter) {
        self.configuration = configuration
        self.limiter = limiter
        self.handler = handler
        self.limits = ParserLimits(configuration)
        self.loop = loop
        self.listenerFD = listenerFD
        self.idleTimeout = nanoseconds(configuration.idleTimeout)
        self.headerTimeout = nanoseconds(configuration.headerTimeout)
        self.bodyTimeout = nanoseconds(configuration.bodyTimeout)
        self.writeTimeout = nanoseconds(configuration.writeTimeout)
        self.accessLog = configuration.accessLog
        self.diagnostics = configuration.diagnostics
        self.errorRenderer = configuration.errorRenderer
        self.workers = HandlerWorkers(loop: loop)
        self.bulkMinimumBodyBytes = configuration.bulkMinimumBodyBytes
    }

    /// The bulk context the next moving connection goes to (round-robin; `bulkTargets` not empty).
    func nextBulkTarget() -> ServerContext {
        let target = bulkTargets[nextBulk]
        nextBulk = nextBulk + 1 == bulkTargets.count ? 0 : nextBulk + 1
        return target
    }

    /// The application's answer to an error the server answers by itself
    /// (`ServerConfiguration.errorRenderer`); a `.file` or `.stream` body is dropped.
    func errorResponse(_ error: ServerError) -> Response {
        var response = errorRenderer(error)
        switch response.body {
        case .empty, .bytes: break
        case .file, .stream, .push: response.body = .empty
        }
        return response
    }

    /// Starts accepting if this context has the listener (loop thread).
    func start() throws {
        let workers = self.workers
        loop.afterJobs.append { workers.afterJobs() }
        if listenerFD >= 0 { try startListening() }
    }

    private func startListening() throws {
        try loop.register(fd: listenerFD, events: EPOLLIN.rawValue, handler: self)
        listening = true
    }

    /// The listening socket is readable: accept what is pending (bounded per wake-up).
    func handleEvent(_ events: UInt32) {
        guard listening else { return }
        for _ in 0..<256 {
            let accepted: (fd: Int32, remote: String)?
            do {
                accepted = try Socket.accept(listenerFD)
            } catch {
                if error.errno == EMFILE || error.errno == ENFILE || error.errno == ENOBUFS || error.errno == ENOMEM {
                    // Out of descriptors: stop accepting for a moment instead of spinning on a
                    // listener that stays readable.
                    if !warnedOutOfDescriptors {
                        warnedOutOfDescriptors = true
                        diagnostics("MiniHTTPServer: \(error); accepting pauses (100 ms at a time) until descriptors are free")
                    }
                    pauseAccepting()
                }
                return
            }
            guard let (fd, remote) = accepted else { return }
            warnedOutOfDescriptors = false
            if let refusal = limiter.admit(remote: remote) {
                // A place beyond the limits, for a health probe only (this loop owns it). When all
                // are taken, the oldest that waits on its client alone gives its place up: a probe
                // sends its request at once and reads its answer, so sockets that stay silent (or
                // never close) cannot hold every place.
                if hasPlaceBeyondLimit() {
                    adopt(fd: fd, remoteAddress: remote, beyondLimit: refusal)
                } else {
                    limiter.refuse(fd: fd, refusal, scratch: loop.buffers.read)
                }
                continue
            }
            if acceptTargets.isEmpty {
                adopt(fd: fd, remoteAddress: remote)
                continue
            }
            let target = acceptTargets[nextTarget]
            nextTarget = nextTarget + 1 == acceptTargets.count ? 0 : nextTarget + 1
            if target === self {
                adopt(fd: fd, remoteAddress: remote)
            } else {
                // A target asked to stop (the server is shutting down) refuses: adopted here, on
                // this loop's thread, never inline on the accepting thread with the target's state.
                if !target.loop.executeIfRunning({ target.adopt(fd: fd, remoteAddress: remote) }) {
                    adopt(fd: fd, remoteAddress: remote)
                }
            }
        }
    }

    /// Takes ownership of an accepted (and admitted) socket: registers it with this loop (loop thread).
    /// `beyondLimit`: admitted beyond the limits (that refusal), for a probe path only.
    func adopt(fd: Int32, remoteAddress: String, beyondLimit: ConnectionCounts.Refusal? = nil) {
        guard !draining else {
            close(fd)
            if beyondLimit == nil { limiter.release(remote: remoteAddress) }
            return
        }
        let connection = Connection(fd: fd, remoteAddress: remoteAddress, loop: loop, server: self)
        connection.beyondLimit = beyondLimit
        do {
            connection.registrationID = try loop.register(fd: fd, events: Self.connectionEvents, handler: connection)
        } catch {
            close(fd)
            if beyondLimit == nil { limiter.release(remote: remoteAddress) }
            return
        }
        track(connection)
        if beyondLimit != nil { beyondLimitConnections.append(connection) }
        connection.updateDeadline()
    }

    /// Whether one more connection may be kept beyond the limits: a place is free, or the oldest
    /// there that waits on its client alone (for its request, or for it to close after its answer)
    /// is closed to free one.
    private func hasPlaceBeyondLimit() -> Bool {
        let places = configuration.answeredBeyondLimit.isEmpty ? 0 : configuration.probeConnectionsBeyondLimit
        if beyondLimitConnections.count < places { return true }
        guard let victim = beyondLimitConnections.first(where: \.waitsOnClient) else { return false }
        victim.close()  // `connectionClosed` takes it off the list
        return true
    }

    /// Counts `connection` as this context's (it releases its limiter slot when it closes here).
    func track(_ connection: Connection) {
        connections[ObjectIdentifier(connection)] = connection
    }

    private func pauseAccepting() {
        guard listening else { return }
        listening = false
        loop.deregister(fd: listenerFD)
        loop.schedule(at: loop.now + 100_000_000) { [self] in
            guard !draining, !listening, !listenerClosed else { return }
            try? startListening()
        }
    }

    func connectionClosed(_ connection: Connection) {
        if connections.removeValue(forKey: ObjectIdentifier(connection)) != nil {
            if connection.beyondLimit != nil {
                beyondLimitConnections.removeAll { $0 === connection }
            } else {
                limiter.release(remote: connection.remoteAddress)
            }
        }
        if draining && connections.isEmpty, let done = onDrained {
            onDrained = nil
            done()
        }
    }

    /// `connection` moved to another loop (`ConnectionHandover`): no longer this context's, still
    /// open (its limiter slot goes with it).
    func connectionMoved(_ connection: Connection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
        connectionClosed_drainedCheck()
    }

    /// Stops accepting, lets busy connections finish within the grace period, then closes the
    /// rest; calls `completion` (loop thread) once no connection is left.
    func shutdown(gracePeriod: Double, completion: @escaping () -> Void) {
        stopAccepting()
        draining = true
        workers.stop()
        onDrained = completion
        for connection in Array(connections.values) { connection.beginShutdown() }
        if connections.isEmpty {
            connectionClosed_drainedCheck()
            return
        }
        loop.schedule(at: monotonicNanoseconds() + nanoseconds(gracePeriod)) { [self] in
            for connection in Array(connections.values) { connection.close(because: "server shutdown: grace period over") }
        }
    }

    /// Deregisters and closes the listening socket, if any (loop thread).
    func stopAccepting() {
        acceptTargets = []  // also breaks the cycle through this context
        if listening {
            listening = false
            loop.deregister(fd: listenerFD)
        }
        if !listenerClosed && listenerFD >= 0 {
            listenerClosed = true
            close(listenerFD)
        }
    }

    private func connectionClosed_drainedCheck() {
        if let done = onDrained, connections.isEmpty {
            onDrained = nil
            done()
        }
    }
}
