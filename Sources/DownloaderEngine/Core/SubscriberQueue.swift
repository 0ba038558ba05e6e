import Foundation

/// One subscriber's pending events. Progress is conflated (at most one pending, always the newest);
/// lifecycle events queue up to `lifecycleLimit` (beyond that the oldest non-terminal one is
/// dropped). Pushing never blocks, so a slow reader never slows a transfer.
final class SubscriberQueue: @unchecked Sendable {
    static let lifecycleLimit = 32

    let id: UInt64
    private let lock = NSLock()
    private var buffer: [DownloadEvent] = []
    private var finished = false
    private var waiter: CheckedContinuation<DownloadEvent?, Never>?
    /// Called once when the queue stops receiving (terminal event, cancel, shutdown, deinit).
    private var onDetach: (@Sendable (UInt64) -> Void)?

    init(id: UInt64, onDetach: @escaping @Sendable (UInt64) -> Void) {
        self.id = id
        self.onDetach = onDetach
    }

    /// Delivers `event`; returns false when the queue no longer accepts events.
    @discardableResult
    func push(_ event: DownloadEvent) -> Bool {
        lock.lock()
        guard !finished else { lock.unlock(); return false }
        if event.isTerminal { finished = true }
        var deliver: CheckedContinuation<DownloadEvent?, Never>?
        if let w = waiter {
            waiter = nil
            deliver = w
        } else {
            enqueue(event)
        }
        let detach = finished ? takeDetach() : nil
        lock.unlock()
        deliver?.resume(returning: event)
        detach?(id)
        return true
    }

    private func enqueue(_ event: DownloadEvent) {
        if case .progress = event {
            buffer.removeAll { if case .progress = $0 { return true } else { return false } }
            buffer.append(event)
            return
        }
        buffer.append(event)
        let lifecycle = buffer.filter { if case .progress = $0 { return false } else { return true } }.count
        if lifecycle > Self.lifecycleLimit,
           let index = buffer.firstIndex(where: { if case .progress = $0 { return false } else { return !$0.isTerminal } }) {
            buffer.remove(at: index)
        }
    }

    private func takeDetach() -> (@Sendable (UInt64) -> Void)? {
        let d = onDetach
        onDetach = nil
        return d
    }

    /// Ends the stream after the already-buffered events (engine shutdown).
    func finish() {
        lock.lock()
        finished = true
        let w = waiter
        waiter = nil
        let detach = takeDetach()
        lock.unlock()
        w?.resume(returning: nil)
        detach?(id)
    }

    /// Ends the stream at once, dropping buffered events (consumer cancelled or went away).
    func cancel() {
        lock.lock()
        finished = true
        buffer.removeAll()
        let w = waiter
        waiter = nil
        let detach = takeDetach()
        lock.unlock()
        w?.resume(returning: nil)
        detach?(id)
    }

    /// The next event, waiting when none is pending; nil at the end.
    func next() async -> DownloadEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<DownloadEvent?, Never>) in
                lock.lock()
                if !buffer.isEmpty {
                    let event = buffer.removeFirst()
                    lock.unlock()
                    continuation.resume(returning: event)
                } else if finished || Task.isCancelled {
                    lock.unlock()
                    continuation.resume(returning: nil)
                } else {
                    waiter = continuation
                    lock.unlock()
                }
            }
        } onCancel: {
            self.cancel()
        }
    }

    var pendingCount: Int {
        lock.lock(); defer { lock.unlock() }
        return buffer.count
    }
}
