import Synchronization

/// Delivers paced progress when it falls due (see `ProgressPacing`): queues whose consumer waits
/// while a not-yet-due progress is pending are watched, and checked every `tickSeconds` on the
/// scheduler while any are. Also remembers each download's latest progress: a deferred progress is
/// not copied into every queue, and a consumer that runs late is handed the newest one.
final class ProgressPacer: Sendable {
    let pacing: ProgressPacing
    let scheduler: any Scheduler
    let tickSeconds: Double
    private let tickNanoseconds: UInt64
    private let subscribers = Atomic<Int>(0)
    /// What the event feed's watchers count for (one per download with live progress, each).
    private let feedUnits = Atomic<Int>(0)
    /// Watched queues by the tick their progress falls due in (tick = due time / `tickNanoseconds`).
    private let state = Mutex<(buckets: [UInt64: [SubscriberQueue]], count: Int, ticking: Bool)>(([:], 0, false))
    /// The latest progress published for each download with subscribers (none after a lifecycle
    /// event, until the next progress), and the version the next record gets.
    private let latest = Mutex<(records: [String: RecordedProgress], version: UInt64)>(([:], 0))

    init(pacing: ProgressPacing = ProgressPacing(), tick: Double = 0.05, scheduler: any Scheduler) {
        self.pacing = pacing
        self.scheduler = scheduler
        self.tickSeconds = tick
        self.tickNanoseconds = max(1, UInt64(tick * 1e9))
    }

    /// The scheduler's monotonic clock in nanoseconds.
    func now() -> UInt64 {
        let seconds = scheduler.monotonic()
        return seconds > 0 ? UInt64(seconds * 1e9) : 0
    }

    /// The clock, the pacing and the subscriber count, for the queues' decisions.
    func pace(now: UInt64? = nil) -> ProgressPace {
        ProgressPace(now: now ?? self.now(), pacing: pacing,
                     subscribers: subscribers.load(ordering: .relaxed) + feedUnits.load(ordering: .relaxed))
    }

    /// The number of subscribers sharing the budget (kept by the registry).
    func setSubscribers(_ count: Int) { subscribers.store(count, ordering: .relaxed) }

    /// The event feed's share of the budget (kept by the feed).
    func setFeedUnits(_ count: Int) { feedUnits.store(count, ordering: .relaxed) }

    var watchedCount: Int { state.withLock { $0.count } }

    /// Records `event` as the download's newest progress (nil: none, after a lifecycle event);
    /// `sequence` is the engine's event sequence number of it (0 when not the engine's). Returns the record.
    @discardableResult
    func setLatestProgress(_ event: DownloadEvent?, of downloadID: String, sequence: UInt64 = 0) -> RecordedProgress? {
        latest.withLock { state -> RecordedProgress? in
            guard let event else {
                state.records[downloadID] = nil
                return nil
            }
            state.version += 1
            let record = RecordedProgress(event: event, version: state.version, sequence: sequence)
            state.records[downloadID] = record
            return record
        }
    }

    func latestProgress(of downloadID: String) -> DownloadEvent? {
        latestRecord(of: downloadID)?.event
    }

    func latestRecord(of downloadID: String) -> RecordedProgress? {
        latest.withLock { $0.records[downloadID] }
    }

    /// Has `subscriberQueue` ticked on the first tick at or after `dueAt`.
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
        scheduler.schedule(after: tickSeconds) { [self] in tick() }
    }

    /// Ticks the queues that are due (only the due buckets are touched; a queue not due yet asks to
    /// be watched again); keeps ticking while any are watched.
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
        for subscriberQueue in due { subscriberQueue.tick() }
        let again = state.withLock { s -> Bool in
            s.ticking = s.count > 0
            return s.ticking
        }
        if again { scheduleTick() }
    }
}
