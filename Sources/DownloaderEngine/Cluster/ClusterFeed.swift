import Foundation

/// Where the cluster feed reads (`ClusterFeedStore`; tests give their own).
protocol ClusterFeedSource: Sendable {
    func stamp() throws(StateStoreError) -> Int
    func start() throws(StateStoreError) -> (version: UInt64, rows: [ClusterRow])
    func changes(after version: UInt64) throws(StateStoreError) -> (changes: [ClusterFeedStore.Change], more: Bool)
}

extension ClusterFeedStore: ClusterFeedSource {}

/// Cluster mode's `GET /events`: the engine's `EventFeed`, fed from the cluster database instead
/// of the engine's own events, so that every replica shows every download of the cluster under the
/// same ids. Every `interval` seconds (on a queue of its own, timed by the engine's scheduler) it
/// stamps what changed (`ClusterFeedStore.stamp`), reads the changes stamped above its cursor, and
/// ingests what each tells (`ClusterFeedState`) with ids derived from their versions
/// (`ClusterEventIDs`). The holder's heartbeat changes a running download's row twice a second, so
/// progress reaches every replica at least once a second; the feed paces it to its watchers within
/// the shared progress budget, as in a single process.
///
/// A watcher that reconnects with a `Last-Event-ID` newer than this replica has applied (it came
/// from a replica that read a little later) waits for one read first, so it is never answered with
/// a fresh snapshot for being early. A lost database tells nothing until it answers again (the
/// streams stay open), then everything that was stamped meanwhile.
final class ClusterFeed: @unchecked Sendable {
    static let interval: Double = 0.25

    private let source: ClusterFeedSource
    private let feed: EventFeed
    private let scheduler: Scheduler
    private let ignoring: Set<String>
    private let interval: Double
    private let work = DispatchQueue(label: "download-engine.cluster-feed")
    /// One read at a time (its database round trips are made holding it, never holding `lock`). A
    /// semaphore: a request waits for it at most 1 s on the monotonic clock (`NSLock.lock(before:)`
    /// waits until a wall-clock instant, which a step of the clock moves).
    private let reading = DispatchSemaphore(value: 1)
    /// What the feed was told (`state`) and the fresh watchers' snapshots of it: held briefly.
    private let lock = NSLock()
    // Guarded by `lock`.
    private var state: ClusterFeedState?
    private var timer: ScheduledTimer?
    private var stopped = false

    init(source: ClusterFeedSource, feed: EventFeed, scheduler: Scheduler, ignoring: Set<String>,
         interval: Double = ClusterFeed.interval) {
        self.source = source
        self.feed = feed
        self.scheduler = scheduler
        self.ignoring = ignoring
        self.interval = interval
    }

    /// Switches the feed to cluster mode and reads where it starts (tried again by each poll while
    /// the database does not answer), then polls every `interval`.
    func start() {
        lock.withLock { feed.becomeCluster(at: 0) }
        whileReading { _ = load() }
        lock.withLock { timer = scheduler.schedule(after: interval) { [weak self] in self?.due() } }
    }

    func stop() {
        lock.withLock {
            stopped = true
            timer?.cancel()
            timer = nil
        }
    }

    /// How far ahead of this replica's reading a reconnecting watcher's id may be for its request to
    /// read the database at once (in versions: changes stamped).
    static let earlyReadWindow: UInt64 = 100_000

    /// A watcher of every download in the cluster (`DownloadEngine.watchAll`).
    func watch(after lastEventID: UInt64?, exempt: Bool) -> FeedSubscription? {
        if let lastEventID {
            let known = feed.clusterVersion ?? 0
            let seen = ClusterEventIDs.version(of: lastEventID)
            // Early: it saw a change this replica has not read yet. Only an id just ahead (what
            // other replicas stamped within a few rounds) reads here, in the request: any other is
            // not one the cluster gave out, and must not make every such request read the database.
            // Behind a read that hangs (the database lost), the request waits 1 s at most.
            if seen > known, seen - known <= Self.earlyReadWindow, reading.wait(timeout: .now() + 1) == .success {
                read()
                reading.signal()
            }
            if let id = feed.replaying(after: lastEventID) { return FeedSubscription(feed: feed, id: id) }
        }
        return lock.withLock { () -> FeedSubscription? in
            guard let id = feed.makeWatcher(expecting: min(state?.count ?? 0, ClusterEventIDs.snapshotLimit), exempt: exempt) else {
                return nil
            }
            feed.start(id, snapshots: state?.snapshots() ?? [])
            return FeedSubscription(feed: feed, id: id)
        }
    }

    private func due() {
        work.async { [weak self] in self?.poll() }
    }

    private func whileReading<T>(_ body: () -> T) -> T {
        reading.wait()
        defer { reading.signal() }
        return body()
    }

    /// One round: stamps, reads, and schedules the next.
    func poll() {
        guard !lock.withLock({ stopped }) else { return }
        whileReading {
            _ = try? source.stamp()
            read()
        }
        lock.withLock {
            guard !stopped else { return }
            timer = scheduler.schedule(after: interval) { [weak self] in self?.due() }
        }
    }

    /// Holding `reading`: reads where the feed starts. A download known already is not told again;
    /// one created meanwhile is told as created once its stamp is read.
    private func load() -> Bool {
        guard let start = try? source.start() else { return false }
        lock.withLock {
            state = ClusterFeedState(version: start.version, rows: start.rows, ignoring: ignoring)
            feed.becomeCluster(at: start.version)
        }
        return true
    }

    /// Holding `reading`: every change stamped above the cursor, told in version order.
    private func read() {
        guard lock.withLock({ state != nil }) || load() else { return }
        for _ in 0..<100 {  // Bounded: 100 batches a round at most; the next round goes on.
            guard let version = lock.withLock({ state?.version }), let found = try? source.changes(after: version) else { return }
            lock.withLock {
                for change in found.changes { feed.ingest(state?.apply(change), version: change.version) }
            }
            guard found.more else { return }
        }
    }
}
