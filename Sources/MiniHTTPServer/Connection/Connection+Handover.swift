import CLinux
import Foundation
import Synchronization

/// Everything a connection carries from one loop to another (`BulkPolicy`): the socket, the
/// protocol state, unparsed input and, on the way to a bulk loop, the response to send there.
/// Built on the loop that gives the connection up and used on the loop that takes it; nothing else
/// touches it in between (`@unchecked`: the prepared file range and the response are plain values).
struct ConnectionHandover: @unchecked Sendable {
    var fd: Int32
    var remoteAddress: String
    var machine: ConnectionStateMachine
    var requestSequence: UInt64
    var inbound: [UInt8]
    var peerHalfClosed: Bool
    var headStartedAt: UInt64
    /// The response to send on arrival (to a bulk loop); nil when coming home for the next request.
    var pending: MovedResponse?
    /// Where the connection returns after the response (nil: it is home).
    var home: ServerContext?
}

/// A handler's response, with what `beginResponse` needs to send it on another loop.
struct MovedResponse {
    var response: Response
    /// The file already opened and planned on the answering loop (its fd travels with it).
    var prepared: FileServer.Prepared?
    var method: String
    var path: String
    var minor: Int
    var requestHeaders: HTTPHeaders
    var sequence: UInt64
    var startedAt: UInt64
}

/// Shared by a server's contexts: open while the server runs; closed when it starts stopping (or
/// when a loop refused a connection, which it does only once asked to stop), so that no connection
/// moves to a loop that may already have stopped and a moved one finishes where it is. A move
/// decided just before the gate closed is refused by a stopping loop (`executeIfRunning`) and kept
/// by the loop that gave it up (`takeBack`). Thread-safe.
final class HandoverGate: Sendable {
    private let closed = Atomic<Bool>(false)

    var isOpen: Bool { !closed.load(ordering: .acquiring) }

    func close() { closed.store(true, ordering: .releasing) }
}

extension Connection {
    /// Loop thread: gives this connection up to a bulk loop, which sends `moved` and then hands the
    /// connection back here. This object stays behind closed (its fd is not closed: the bulk loop
    /// owns it now); late calls on it (the handler worker finishing) find it closed.
    func moveToBulkLoop(_ moved: MovedResponse) {
        let target = server.nextBulkTarget()
        let handover = detach(pending: moved, home: server)
        if !target.loop.executeIfRunning({ target.adoptMoved(handover) }) { takeBack(handover) }
    }

    /// Loop thread, on a bulk loop after the moved response ended with the connection kept alive:
    /// the connection goes back to the loop it came from for its next request (pipelined input
    /// included), so requests are parsed and answered at that loop's priority.
    /// Returns false (the connection stays here) once the server is stopping.
    func returnHome() -> Bool {
        guard let home, server.handovers.isOpen else {
            self.home = nil
            return false
        }
        let handover = detach(pending: nil, home: nil)
        if !home.loop.executeIfRunning({ home.adoptMoved(handover) }) { takeBack(handover) }
        return true
    }

    /// The loop the connection was handed to refused it: it was asked to stop, so the server is
    /// shutting down (the gate had not closed yet when the move was decided). Its context is about
    /// to be run by no thread, so this loop takes the connection back on its own thread (next
    /// turn, not inside the response being begun) and no connection moves any more: it is served
    /// here, or closed if this context is draining already (`adoptMoved`).
    private func takeBack(_ handover: ConnectionHandover) {
        server.handovers.close()
        var back = handover
        back.home = nil
        let context = server, kept = back
        loop.execute { context.adoptMoved(kept) }
    }

    private func detach(pending: MovedResponse?, home: ServerContext?) -> ConnectionHandover {
        let handover = ConnectionHandover(fd: fd, remoteAddress: remoteAddress, machine: machine,
                                          requestSequence: requestSequence, inbound: inbound,
                                          peerHalfClosed: peerHalfClosed, headStartedAt: headStartedAt,
                                          pending: pending, home: home)
        isClosed = true
        loop.deregister(fd: fd)  // out of this loop's epoll; the descriptor stays open
        inbound = []
        body = []
        server.connectionMoved(self)
        return handover
    }

    /// Loop thread of the taking context: takes over the state the handover carries.
    func restore(_ handover: ConnectionHandover) {
        machine = handover.machine
        requestSequence = handover.requestSequence
        inbound = handover.inbound
        peerHalfClosed = handover.peerHalfClosed
        headStartedAt = handover.headStartedAt
        home = handover.home
    }

    /// The moved connection is registered here: send its response, or carry on reading requests.
    func arrived(with pending: MovedResponse?) {
        if let pending {
            beginResponse(pending.response, method: pending.method, path: pending.path, minor: pending.minor,
                          requestHeaders: pending.requestHeaders, sequence: pending.sequence,
                          startedAt: pending.startedAt, prepared: pending.prepared)
            return
        }
        processInbound()
        if !isClosed && machine.wantsToRead { readAndProcess() }
        if !isClosed { updateDeadline() }
    }

    /// The taking context cannot keep the connection (shutting down, or epoll refused it): close
    /// it, and let a push source hear that its response ended unsent, as a closed connection's does.
    func abandon(_ pending: MovedResponse?) {
        if let range = pending?.prepared?.range { Glibc.close(range.fd) }
        if case .push(let body)? = pending?.response.body, let pending {
            push = PushStream(connection: self, sequence: pending.sequence, source: body.source,
                              length: body.length, chunked: false)
        }
        close()
    }
}

extension ServerContext {
    /// Loop thread: takes over a connection another loop gave up (`ConnectionHandover`).
    func adoptMoved(_ handover: ConnectionHandover) {
        let connection = Connection(fd: handover.fd, remoteAddress: handover.remoteAddress, loop: loop, server: self)
        connection.restore(handover)
        track(connection)
        guard !draining else {
            connection.abandon(handover.pending)
            return
        }
        do {
            connection.registrationID = try loop.register(fd: handover.fd, events: Self.connectionEvents,
                                                          handler: connection)
        } catch {
            connection.abandon(handover.pending)
            return
        }
        connection.arrived(with: handover.pending)
    }
}
