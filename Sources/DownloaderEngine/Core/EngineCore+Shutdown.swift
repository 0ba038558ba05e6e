import Foundation

// Stopping: every transfer stops where it stands, partials are kept and stored as running.
extension EngineCore {
    /// Stops every transfer, keeps the partials (stored as still running), ends subscriptions.
    /// Returns the final commit's failure (nil: everything decided is stored).
    func shutdown() async -> StateStoreError? {
        let first = decide { () -> Bool in
            guard !shuttingDown else { return false }
            shuttingDown = true
            slots.clearWaiting()
            for record in byID.values {
                if record.state == .downloading || record.state == .queued { tell(.stopped(bytesWritten: record.bytesWritten), of: record) }
                handle(.shutdown, for: record)
            }
            return true
        }
        for queue in subscribers.all() { queue.finish() }
        feed.finish()
        guard first else { return nil }  // The first call reports.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let drained: Bool = locked {
                if byID.values.contains(where: { $0.attempt != nil }) {
                    shutdownWaiter = continuation
                    return false
                }
                return true
            }
            if drained { continuation.resume(); return }
            // Bounded: a driver that never reports back does not hold shutdown forever. Armed once
            // the wait is there to end (armed before, a bound that ran out first ended nothing, and
            // the wait after it was never ended).
            scheduler.schedule(after: 10) { [weak self] in self?.endShutdownWait() }
        }
        decide {
            for record in byID.values where record.state == .queued || record.state == .downloading { save(record) }
        }
        return stateWriter.finish()
    }

    /// Under `lock`: once the last attempt has settled, the shutdown stops waiting.
    func resumeShutdownIfDrained() {
        guard shuttingDown, !byID.values.contains(where: { $0.attempt != nil }), let waiter = shutdownWaiter else { return }
        shutdownWaiter = nil
        effects.append { waiter.resume() }
    }

    private func endShutdownWait() {
        let waiter: CheckedContinuation<Void, Never>? = locked {
            defer { shutdownWaiter = nil }
            return shutdownWaiter
        }
        waiter?.resume()
    }
}
