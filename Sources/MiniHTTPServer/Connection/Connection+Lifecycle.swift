import CLinux
import Foundation

/// Timeouts, shutdown and closing.
extension Connection {
    // MARK: Timers

    func updateDeadline() {
        guard !isClosed, !lingering else { return }
        let server = self.server
        let next: UInt64?
        switch machine.deadline(writesPending: !writes.isEmpty) {
        case nil: next = nil
        case .idle?: next = loop.now + server.idleTimeout
        // Beyond the connection limits a probe's request comes at once: a silent socket does not
        // keep one of the few places long.
        case .header?: next = headStartedAt + (beyondLimit == nil ? server.headerTimeout : min(server.headerTimeout, Self.beyondLimitHeaderTimeout))
        case .body?: next = min(lastProgressAt + server.headerTimeout, bodyStartedAt + server.bodyTimeout)
        case .write?: next = lastProgressAt + server.writeTimeout
        }
        setDeadline(next)
    }

    /// At most one live timer entry per connection: only an earlier deadline schedules a new one;
    /// a later one is picked up when the earlier entry fires.
    func setDeadline(_ next: UInt64?) {
        deadline = next
        if let next, scheduledDeadline.map({ next < $0 }) ?? true {
            scheduledDeadline = next
            loop.schedule(at: next, fd: fd, registrationID: registrationID)
        }
    }

    func timerFired(deadline fired: UInt64) {
        guard !isClosed, scheduledDeadline == fired else { return }
        scheduledDeadline = nil
        guard let deadline else { return }
        if deadline > loop.now {
            scheduledDeadline = deadline
            loop.schedule(at: deadline, fd: fd, registrationID: registrationID)
            return
        }
        self.deadline = nil
        if lingering {
            close()
            return
        }
        switch machine.timedOut() {
        case .sendErrorAndClose(let status):
            let response = server.errorResponse(ServerError(status: status, kind: .requestTimeout,
                                                            reason: "request not received in time"))
            mayRead = false
            inbound = []
            abandonedInput = true
            beginResponse(response, method: current?.method ?? "-", path: current.map { pathOf($0.target) } ?? "-",
                          minor: 1, requestHeaders: HTTPHeaders(), sequence: requestSequence, startedAt: headStartedAt)
        case .close:
            close(because: "write timeout: no byte taken by the client for \(server.configuration.writeTimeout) s")
        default:
            break
        }
    }

    // MARK: Shutdown and close

    func beginShutdown() {
        guard !isClosed else { return }
        if lingering {
            close()
            return
        }
        if machine.shutdownRequested() == .close {
            close(because: "server shutdown")
            return
        }
        if response?.isStream == true { servingWorker?.cancel() }
        if let push, !push.isEnded { push.source.serverShuttingDown(push) }
    }

    /// Closes after a response: shut down our side first so unread input does not turn into a
    /// reset that could destroy the response, then discard input until the peer closes (bounded).
    func lingeringClose() {
        guard !isClosed, !lingering else { return }
        // Only when the client may still be sending (a rejected or unread request, buffered or
        // unread input); a cleanly finished exchange closes at once, as nginx does.
        let clientMaySend = abandonedInput || !inbound.isEmpty || mayRead
        if !clientMaySend || server.draining || Glibc.shutdown(fd, Int32(SHUT_WR)) != 0 {
            close()
            return
        }
        lingering = true
        inbound = []
        setDeadline(loop.now + 2_000_000_000)
        drainLingering()
    }

    func drainLingering() {
        while !isClosed {
            let result = try? Socket.read(fd, into: loop.buffers.read)
            switch result {
            case .wouldBlock?: return
            case .processed(let n)? where n > 0:
                lingerBudget -= n
                if lingerBudget <= 0 { close() }
            default: close(); return
            }
        }
    }

    /// Closes; a response in progress is cut short, and the access log says why.
    func close(because reason: @autoclosure () -> String) {
        noteAbort(reason())
        close()
    }

    /// The access log's reason for cutting the response in progress short (the first one given).
    func noteAbort(_ reason: @autoclosure () -> String) {
        if !isClosed, let progress = response, progress.abortReason == nil { progress.abortReason = reason() }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        machine.closed()
        loop.deregister(fd: fd, closing: true)
        Glibc.close(fd)
        writes.removeAll()
        inbound = []
        body = []
        servingWorker?.cancel()  // the handler (or stream) learns the client is gone
        if let waiter = streamWaiter {
            streamWaiter = nil
            waiter.resume(throwing: ConnectionClosedError())
        }
        endPushOnClose()
        if let progress = response {
            response = nil
            logAccess(progress)
        }
        server.connectionClosed(self)
    }
}
