/// An idle heartbeat of a stream response (`ResponseBodyWriter.setIdleHeartbeat`): `bytes` go out
/// whenever the stream has been silent for `interval`. Driven by one timer-heap entry per stream
/// on the connection's loop (no task, no sleeping closure); the entry holds the connection weakly.
struct StreamHeartbeat {
    let sequence: UInt64
    let bytes: [UInt8]
    /// Nanoseconds of silence before `bytes` are written.
    let interval: UInt64

    enum Decision: Equatable {
        /// Write the heartbeat now, then check again after another interval.
        case write
        /// Check again at this deadline.
        case wait(until: UInt64)
    }

    /// Pure: what to do at `now` given when output last reached the socket and whether output is
    /// still queued. Queued output means the client is not reading: nothing is added (the write
    /// timeout deals with such a client), the next check is an interval later.
    func decide(now: UInt64, lastOutputAt: UInt64, outputQueued: Bool) -> Decision {
        if outputQueued { return .wait(until: now &+ interval) }
        let due = lastOutputAt &+ interval
        return due <= now ? .write : .wait(until: due)
    }
}

extension StreamBodyWriter {
    func setIdleHeartbeat(_ bytes: [UInt8], after seconds: Double) -> Bool {
        guard !bytes.isEmpty, seconds > 0 else { return true }
        let heartbeat = StreamHeartbeat(sequence: sequence, bytes: bytes, interval: max(1_000_000, nanoseconds(seconds)))
        let connection = self.connection
        if connection.loop.inEventLoop {
            connection.scheduleHeartbeat(heartbeat, at: connection.loop.now &+ heartbeat.interval)
        } else {
            connection.loop.execute { connection.scheduleHeartbeat(heartbeat, at: connection.loop.now &+ heartbeat.interval) }
        }
        return true
    }
}

extension Connection {
    /// Loop thread.
    func scheduleHeartbeat(_ heartbeat: StreamHeartbeat, at deadline: UInt64) {
        loop.schedule(at: deadline) { [weak self] in self?.heartbeatTimerFired(heartbeat) }
    }

    /// Loop thread: the stream's heartbeat check; ends with the stream.
    private func heartbeatTimerFired(_ heartbeat: StreamHeartbeat) {
        guard !isClosed, let progress = response, progress.sequence == heartbeat.sequence, progress.isStream,
              !progress.complete else { return }
        let now = loop.now
        switch heartbeat.decide(now: now, lastOutputAt: lastProgressAt, outputQueued: !writes.isEmpty) {
        case .write:
            // The queue is empty, so no stream writer is waiting for it to drain.
            guard streamWrite(heartbeat.bytes, sequence: heartbeat.sequence) != .closed else { return }
            scheduleHeartbeat(heartbeat, at: now &+ heartbeat.interval)
        case .wait(let deadline):
            scheduleHeartbeat(heartbeat, at: deadline)
        }
    }
}
