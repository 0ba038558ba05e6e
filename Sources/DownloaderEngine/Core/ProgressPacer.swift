import Foundation
import Synchronization

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

/// Delivers paced progress when it falls due: queues whose consumer waits while a not-yet-due
/// progress is pending are watched, and checked every `tick` on its own queue while any are.
/// Also remembers each download's latest progress, for consumers that fell behind.
final class ProgressPacer: Sendable {
    let pacing: ProgressPacing
    /// Monotonic nanoseconds.
    let now: @Sendable () -> UInt64
    let tickNanoseconds: UInt64
    private let subscribers = Atomic<Int>(0)
    /// Watched queues by the tick their progress falls due in (tick = due time / `tickNanoseconds`).
    private let state = Mutex<(buckets: [UInt64: [SubscriberQueue]], count: Int, ticking: Bool)>(([:], 0, false))
    private let queue = DispatchQueue(label: "download-engine.progress-pacer")

    init(pacing: ProgressPacing = ProgressPacing(), tick: Double = 0.05,
         now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.pacing = pacing
        self.tickNanoseconds = max(1, UInt64(tick * 1e9))
        self.now = now
    }

    /// The number of subscribers sharing the budget (kept by the registry).
    func setSubscribers(_ count: Int) { subscribers.store(count, ordering: .relaxed) }

    func spacing(queue: UInt64, delivery: UInt64) -> UInt64 {
        pacing.spacing(subscribers: subscribers.load(ordering: .relaxed), queue: queue, delivery: delivery)
    }

    var watchedCount: Int { state.withLock { $0.count } }

    /// The latest progress published for each download with subscribers (nil after a lifecycle
    /// event, until the next progress).
    private let latest = Mutex<[String: DownloadEvent]>([:])

    func setLatestProgress(_ event: DownloadEvent?, of downloadID: String) {
        latest.withLock { $0[downloadID] = event }
    }

    func latestProgress(of downloadID: String) -> DownloadEvent? {
        latest.withLock { $0[downloadID] }
    }

    /// Delivers `subscriberQueue`'s pending progress on the first tick at or after `dueAt`.
    func watch(_ subscriberQueue: SubscriberQueue, dueAt: UInt64) {
        let start = state.withLock { s -> Bool in
            s.buckets[dueAt / tickNanoseconds, default: []].append(subscriberQueue)
            s.count += 1
            defer { s.ticking = true }
            return !s.ticking
        }
        if start { scheduleTick() }
    }

    private func scheduleTick() {
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(tickNanoseconds))) { [self] in tick() }
    }

    /// Delivers what is due (only the due buckets are touched); keeps ticking while any are watched.
    func tick() {
        let current = now() / tickNanoseconds
        let due = state.withLock { s -> [SubscriberQueue] in
            var due: [SubscriberQueue] = []
            for key in s.buckets.keys.filter({ $0 <= current }) {
                due.append(contentsOf: s.buckets.removeValue(forKey: key) ?? [])
            }
            s.count -= due.count
            return due
        }
        for subscriberQueue in due {
            if let later = subscriberQueue.deliverIfDue() { watch(subscriberQueue, dueAt: later) }
        }
        let again = state.withLock { s -> Bool in
            s.ticking = s.count > 0
            return s.ticking
        }
        if again { scheduleTick() }
    }
}
