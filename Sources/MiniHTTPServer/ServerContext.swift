import CLinux
import Foundation

/// The server's state on its loop thread: the listening socket and every open connection.
final class ServerContext: Selectable, @unchecked Sendable {
    let configuration: ServerConfiguration
    let handler: HTTPHandler
    let limits: ParserLimits
    let loop: EventLoop
    let listenerFD: Int32
    // Hot-path copies of configuration values (nanoseconds), so connections never copy the struct.
    let idleTimeout: UInt64
    let headerTimeout: UInt64
    let writeTimeout: UInt64
    let accessLog: (@Sendable (AccessLogEntry) -> Void)?
    @exclusivity(unchecked)
    private(set) var draining = false
    @exclusivity(unchecked)
    private var listening = false
    @exclusivity(unchecked)
    private var sweeping = false
    @exclusivity(unchecked)
    private var listenerClosed = false
    @exclusivity(unchecked)
    private var connections: [ObjectIdentifier: Connection] = [:]
    @exclusivity(unchecked)
    private var onDrained: (() -> Void)?

    static let connectionEvents = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue

    init(configuration: ServerConfiguration, handler: @escaping HTTPHandler, loop: EventLoop, listenerFD: Int32) {
        self.configuration = configuration
        self.handler = handler
        self.limits = ParserLimits(configuration)
        self.loop = loop
        self.listenerFD = listenerFD
        self.idleTimeout = nanoseconds(configuration.idleTimeout)
        self.headerTimeout = nanoseconds(configuration.headerTimeout)
        self.writeTimeout = nanoseconds(configuration.writeTimeout)
        self.accessLog = configuration.accessLog
    }

    var connectionCount: Int { connections.count }

    /// Starts accepting (loop thread).
    func startListening() throws {
        try loop.register(fd: listenerFD, events: EPOLLIN.rawValue, handler: self)
        listening = true
        if !sweeping {
            sweeping = true
            scheduleHandlerTaskSweep()
        }
    }

    /// Once a second, end handler tasks that have waited over a second for a next request: busy
    /// keep-alive connections reuse their task, idle ones cost no task memory.
    private func scheduleHandlerTaskSweep() {
        loop.schedule(at: loop.now + 1_000_000_000) { [self] in
            guard !draining else { return }
            let cutoff = loop.now &- 1_000_000_000
            for connection in connections.values { connection.releaseIdleHandlerTask(waitingSince: cutoff) }
            scheduleHandlerTaskSweep()
        }
    }

    /// The listening socket is readable: accept what is pending (bounded per wake-up).
    func handleEvent(_ events: UInt32) {
        guard listening else { return }
        for _ in 0..<256 {
            let accepted: (fd: Int32, remote: String)?
            do {
                accepted = try Socket.accept(listenerFD)
            } catch let error as SystemError {
                if error.errno == EMFILE || error.errno == ENFILE || error.errno == ENOBUFS || error.errno == ENOMEM {
                    // Out of descriptors: stop accepting for a moment instead of spinning on a
                    // listener that stays readable.
                    FileHandle.standardError.write(Data("MiniHTTPServer: \(error); pausing accept\n".utf8))
                    pauseAccepting()
                }
                return
            } catch {
                return
            }
            guard let (fd, remote) = accepted else { return }
            let connection = Connection(fd: fd, remoteAddress: remote, loop: loop, server: self)
            do {
                connection.registrationID = try loop.register(fd: fd, events: Self.connectionEvents, handler: connection)
            } catch {
                close(fd)
                continue
            }
            connections[ObjectIdentifier(connection)] = connection
            connection.updateDeadline()
        }
    }

    private func pauseAccepting() {
        guard listening else { return }
        listening = false
        loop.deregister(fd: listenerFD)
        loop.schedule(at: loop.now + 100_000_000) { [self] in
            guard !draining, !listening else { return }
            try? startListening()
        }
    }

    func connectionClosed(_ connection: Connection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
        if draining && connections.isEmpty, let done = onDrained {
            onDrained = nil
            done()
        }
    }

    /// Stops accepting, lets busy connections finish within the grace period, then closes the
    /// rest; calls `completion` (loop thread) once no connection is left.
    func shutdown(gracePeriod: Double, completion: @escaping () -> Void) {
        if listening {
            listening = false
            loop.deregister(fd: listenerFD)
        }
        if !listenerClosed {
            listenerClosed = true
            close(listenerFD)
        }
        draining = true
        onDrained = completion
        for connection in Array(connections.values) { connection.beginShutdown() }
        if connections.isEmpty {
            connectionClosed_drainedCheck()
            return
        }
        loop.schedule(at: monotonicNanoseconds() + nanoseconds(gracePeriod)) { [self] in
            for connection in Array(connections.values) { connection.close() }
        }
    }

    private func connectionClosed_drainedCheck() {
        if let done = onDrained, connections.isEmpty {
            onDrained = nil
            done()
        }
    }
}
