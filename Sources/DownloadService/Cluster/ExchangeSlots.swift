import Synchronization

/// `PeerForwarder`'s bound on exchanges running at once. A request that finds all `limit` slots
/// taken waits its turn in a FIFO of at most `queueLimit` waiters, each for at most `maxWait`
/// seconds; beyond either bound (or when its client leaves) it is refused. A freed slot passes
/// straight to the oldest waiter, so waiting never lets more than `limit` exchanges run.
final class ExchangeSlots: Sendable {
    enum Refusal: Sendable, Equatable {
        /// `queueLimit` requests wait already.
        case queueFull
        /// No slot came free within `maxWait`.
        case waitedTooLong
        /// The waiting task was cancelled (its client left).
        case cancelled
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Refusal?, Never>
        let timer: Task<Void, Never>
    }

    private struct State {
        var running = 0
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    let limit: Int
    let queueLimit: Int
    let maxWait: Double
    private let state = Mutex(State())

    init(limit: Int, queueLimit: Int, maxWait: Double) {
        self.limit = max(1, limit)
        self.queueLimit = max(0, queueLimit)
        self.maxWait = max(0, maxWait)
    }

    /// Slots taken now.
    var running: Int { state.withLock { $0.running } }
    /// Requests waiting for a slot now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Takes a slot (nil), waiting for one when all are taken; `release()` gives it back.
    func acquire() async -> Refusal? {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Refusal?, Never>) in
                let immediate = state.withLock { state -> Refusal?? in
                    if state.running < limit {
                        state.running += 1
                        return .some(nil)
                    }
                    if Task.isCancelled { return .some(.cancelled) }
                    if state.waiters.count >= queueLimit { return .some(.queueFull) }
                    let timer = Task { [self] in
                        try? await Task.sleep(for: .seconds(maxWait))
                        if !Task.isCancelled { refuse(id, .waitedTooLong) }
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation, timer: timer))
                    return .none
                }
                if case .some(let answer) = immediate { continuation.resume(returning: answer) }
            }
        } onCancel: {
            refuse(id, .cancelled)
        }
    }

    /// Gives a slot back: to the oldest waiter, or free.
    func release() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiters.isEmpty else {
                state.running = max(0, state.running - 1)
                return nil
            }
            return state.waiters.removeFirst()
        }
        guard let next else { return }
        next.timer.cancel()
        next.continuation.resume(returning: nil)
    }

    /// Ends waiter `id`'s wait with `refusal`, when it still waits.
    private func refuse(_ id: UInt64, _ refusal: Refusal) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        guard let waiter else { return }
        if refusal != .waitedTooLong { waiter.timer.cancel() }
        waiter.continuation.resume(returning: refusal)
    }
}
