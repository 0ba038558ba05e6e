/// How often one subscriber may be woken for progress when many listen: the engine's progress
/// deliveries (each a write to a client, in the service) stay within `deliveriesPerSecond` in all,
/// shared by the subscribers. Pure.
struct ProgressPacing: Sendable, Equatable {
    /// Progress deliveries per second shared by all subscribers (default 5 000: up to 500
    /// subscribers get every progress event, 10 000 get one about every 2 s; lifecycle events are
    /// never paced).
    var deliveriesPerSecond: Double = 5_000
    /// Below this mean spacing (seconds) nothing is paced: the engine emits progress at most every
    /// `EngineConfiguration.progressInterval` (0.1 s by default) per download anyway.
    var minimumSpacing: Double = 0.1

    /// Mean nanoseconds between two progress deliveries to one subscriber; 0 = unpaced.
    func meanSpacing(subscribers: Int) -> UInt64 {
        guard deliveriesPerSecond > 0 else { return 0 }
        let seconds = Double(subscribers) / deliveriesPerSecond
        return seconds < minimumSpacing ? 0 : UInt64(seconds * 1e9)
    }

    /// The spacing after delivery number `delivery` to queue `queue`: the mean times a factor in
    /// [0.5, 1.5) that varies by queue and delivery, so subscribers that were woken together (by a
    /// `resumed` event, say) spread out instead of all writing in the same instant every time.
    func spacing(subscribers: Int, queue: UInt64, delivery: UInt64) -> UInt64 {
        let mean = meanSpacing(subscribers: subscribers)
        guard mean > 0 else { return 0 }
        var x = queue &* 0x9E37_79B9_7F4A_7C15 ^ delivery &* 0xBF58_476D_1CE4_E5B9
        x ^= x >> 31
        x = x &* 0x94D0_49BB_1331_11EB
        x ^= x >> 29
        let fraction = Double(x >> 11) / Double(1 << 53)  // [0, 1)
        return UInt64(Double(mean) * (0.5 + fraction))
    }
}

/// What pacing needs to know at the moment of a decision: the pacer's clock (monotonic
/// nanoseconds), its pacing and how many subscribers share the budget. Taken once per publish.
struct ProgressPace: Sendable, Equatable {
    var now: UInt64
    var pacing: ProgressPacing
    var subscribers: Int
}

/// One subscriber's pacing: when the next progress may wake its consumer. Pure; part of
/// `SubscriberQueueState`.
struct SubscriberPacing: Sendable, Equatable {
    /// Varies the spacing from queue to queue (the queue's id).
    let key: UInt64
    /// The earliest time (pacer clock) the next progress may wake the consumer; 0 = at once.
    var dueAt: UInt64 = 0
    /// Progress deliveries so far (varies the spacing between them).
    var deliveries: UInt64 = 0
    /// The consumer waits while a not-yet-due progress is pending; the pacer watches the queue.
    var deferred = false

    func isDue(_ pace: ProgressPace) -> Bool {
        dueAt == 0 || pace.now >= dueAt
    }

    /// The consumer was handed an event at `pace.now` (a lifecycle event counts: it carries a
    /// snapshot too, so 10 000 streams woken by `resumed` do not all want a progress right after).
    mutating func delivered(_ pace: ProgressPace) {
        deliveries &+= 1
        let spacing = pace.pacing.spacing(subscribers: pace.subscribers, queue: key, delivery: deliveries)
        dueAt = spacing == 0 ? 0 : pace.now &+ spacing
    }
}
