/// One download's subscriber queues, split by what a progress event can do to them. Pure (generic
/// over the queue so that tests can use plain values); `SubscriberRegistry` keeps one per download
/// under its lock.
///
/// A queue is *parked* while a progress offered to it would change nothing
/// (`SubscriberQueueState.isParked`): its consumer is busy (it reads the download's newest recorded
/// progress itself when it asks), waits for the pacer's tick (which reads it too), or the queue has
/// finished. So publishing a progress visits only the `awake` queues: those whose consumer waits for
/// a progress that is due. With 10 000 paced subscribers that is the few whose tick found nothing
/// new, instead of all 10 000 (or, right after a lifecycle event, all those still writing it), on
/// the transfer's thread.
///
/// The invariant that keeps it safe: a queue whose state is not parked is in `awake`. A state
/// becomes unparked only in a consumer's ask or the tick, both decided under the registry's lock
/// (which a progress publish holds), and the queue is moved to match before the lock is released;
/// a queue is parked only when its state says so under that lock. A lifecycle event never unparks a
/// state. A queue found awake that is parked costs one offer that changes nothing.
struct SubscriberParking<Queue> {
    private(set) var awake: [UInt64: Queue] = [:]
    private(set) var parked: [UInt64: Queue] = [:]

    var isEmpty: Bool { awake.isEmpty && parked.isEmpty }
    var count: Int { awake.count + parked.count }

    /// Every queue, awake first.
    var all: [Queue] { Array(awake.values) + Array(parked.values) }

    /// A new queue: awake (its consumer has not waited yet).
    mutating func add(_ id: UInt64, _ queue: Queue) {
        parked[id] = nil
        awake[id] = queue
    }

    /// The queue is gone (detached): returns whether it was here.
    @discardableResult
    mutating func remove(_ id: UInt64) -> Bool {
        (awake.removeValue(forKey: id) ?? parked.removeValue(forKey: id)) != nil
    }

    /// The queue's consumer waits for the tick: progress need not visit it.
    mutating func park(_ id: UInt64) {
        guard let queue = awake.removeValue(forKey: id) else { return }
        parked[id] = queue
    }

    /// The queue's consumer waits for a progress: progress visits it again.
    mutating func unpark(_ id: UInt64) {
        guard let queue = parked.removeValue(forKey: id) else { return }
        awake[id] = queue
    }

    func isParked(_ id: UInt64) -> Bool { parked[id] != nil }
}
