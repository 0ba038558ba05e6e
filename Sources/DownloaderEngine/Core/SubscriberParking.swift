/// One download's subscriber queues, split by what a progress event can do to them. Pure (generic
/// over the queue so that tests can use plain values); `SubscriberRegistry` keeps one per download
/// under its lock.
///
/// A queue is *parked* while its consumer waits for a paced progress that the pacer's tick will
/// hand over when due (`SubscriberQueueState.isParked`): a progress pushed to it would change
/// nothing (the tick reads the download's newest progress itself), so publishing a progress visits
/// only the `awake` queues. With 10 000 paced subscribers that is the few woken since the last
/// progress instead of all 10 000, on the transfer's thread.
///
/// The invariant that keeps it safe: a queue that is not parked is in `awake`. So a queue is parked
/// only after its state says so (checked under the registry's lock, which the tick also holds while
/// it changes the state), and unparked before anything else changes that state (the tick, a
/// lifecycle event). A parked queue found awake costs one push that changes nothing.
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

    /// The queue's state may change (the tick, a lifecycle event): progress visits it again.
    mutating func unpark(_ id: UInt64) {
        guard let queue = parked.removeValue(forKey: id) else { return }
        awake[id] = queue
    }

    /// Every queue is awake again (before a lifecycle event goes to all of them).
    mutating func unparkAll() {
        guard !parked.isEmpty else { return }
        awake.merge(parked) { current, _ in current }
        parked = [:]
    }

    func isParked(_ id: UInt64) -> Bool { parked[id] != nil }
}
