import Foundation

/// Work the engine decided under its lock and carries out after unlocking, in the order it was
/// decided: events to subscribers, state writes, transfers started and cancelled, timers armed,
/// partial files set aside. Whoever finds the queue idle drains it, also of what other threads add
/// meanwhile, so an effect never runs under the engine's lock, never runs twice, and never overtakes
/// one decided before it (a subscriber never sees `paused` before the `resumed` decided earlier; a
/// partial is set aside before the attempt decided after it opens the file). Effects must not wait
/// for other effects (they dispatch slow work to queues instead).
final class EffectQueue: @unchecked Sendable {
    typealias Effect = @Sendable () -> Void

    private let lock = NSLock()
    private var pending: [Effect] = []
    private var draining = false

    /// Queues `effect` (called with the engine's lock held, so the order is the order of decisions).
    func append(_ effect: @escaping Effect) {
        lock.lock()
        pending.append(effect)
        lock.unlock()
    }

    /// Runs what is pending, unless another thread is already at it (it then runs these too).
    func drain() {
        lock.lock()
        guard !draining else {
            lock.unlock()
            return
        }
        draining = true
        while !pending.isEmpty {
            var batch: [Effect] = []
            swap(&batch, &pending)
            lock.unlock()
            for effect in batch { effect() }
            lock.lock()
        }
        draining = false
        lock.unlock()
    }
}
