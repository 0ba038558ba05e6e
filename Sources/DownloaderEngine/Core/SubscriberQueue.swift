import Foundation

/// One subscriber's pending events. Progress is conflated (a newer progress replaces a pending one);
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

    private static func isProgress(_ event: DownloadEvent) -> Bool {
        if case .progress = event { return true } else { return false }
    }

    /// A progress replaces a pending progress that nothing follows; lifecycle events queue up.
    /// The first element (the current snapshot) therefore stays first.
    private func enqueue(_ event: DownloadEvent) {
        if Self.isProgress(event), let last = buffer.last, Self.isProgress(last) {
            buffer[buffer.count - 1] = event
            return
        }
        buffer.append(event)
        guard !Self.isProgress(event) else { return }
        let lifecycle = buffer.count { !Self.isProgress($0) }
        if lifecycle > Self.lifecycleLimit,
           let index = buffer.firstIndex(where: { !Self.isProgress($0) && !$0.isTerminal }) {
            buffer.remove(at: index)
            // Two progress events now adjacent: keep the newer.
            if index > 0, index < buffer.count, Self.isProgress(buffer[index - 1]), Self.isProgress(buffer[index]) {
                buffer.remove(at: index - 1)
            }
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
