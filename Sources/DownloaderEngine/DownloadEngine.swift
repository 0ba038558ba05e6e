import Foundation
import Synchronization

/// The one owner of download state: coalescing, caller tokens, transfers, storage and subscribers.
///
/// - One download per normalised URL; every request gets its own caller token.
/// - Cancel is pause: when the last caller leaves, the transfer stops and the partial is kept
///   (with its validator) for a later `Range`/`If-Range` resume under the same id.
/// - State is kept in the state area (`state.db`, SQLite), caller tokens as hashes. After a restart (crash or
///   shutdown alike), downloads that were running carry on by themselves and their callers' tokens
///   still work; paused ones stay paused.
public final class DownloadEngine: Sendable {
    public let configuration: EngineConfiguration
    let core: EngineCore
    /// What start-up recovered from the state store.
    let recovery: EngineCore.RecoveryReport
    /// The SSRF guard's rules, checked on every request before it reaches the core.
    let egress: EgressRules
    /// Completion webhooks: callers' callbacks and their deliveries (stored in the state database;
    /// in cluster mode in the cluster database, `ClusterWebhooks`).
    public let webhooks: WebhookDispatcher
    /// Cluster mode: reads of downloads not held here, answered from the database (nil: single process).
    let clusterReads: ClusterReads?
    /// Cluster mode: `watchAll` shows every download of the cluster (nil: single process).
    let clusterFeed: ClusterFeed?
    /// `HEAD` probes running (`probe`), at most `configuration.maxConcurrentProbes`.
    let probesRunning = Atomic<Int>(0)

    /// Creates the storage areas, loads the state (importing an earlier release's journal once),
    /// carries on downloads that were running,
    /// and starts the pressure monitor (memory PSI / cgroup events, free space of each area).
    /// Transfers go through libcurl with the SSRF guard's rules. Throws `HostRuleError` for a bad
    /// `allowHosts`/`denyHosts` entry, `TrustedCertificatesError` for a `caFile` that cannot be used,
    /// `ProxyConfigurationError` for a bad `upstreamProxy` or `noProxy`.
    public convenience init(configuration: EngineConfiguration) throws {
        let trust = try configuration.caFile.map { path throws(TrustedCertificatesError) in try TrustedCertificates(pemFile: path) }
        let proxy = try configuration.upstreamProxy.map { url throws(ProxyConfigurationError) in try UpstreamProxy.parse(url).get() }
        let driver = CurlTransferDriver(egress: try EgressRules(configuration),
                                        maxResponseHeaderBytes: configuration.maxResponseHeaderBytes, trust: trust,
                                        proxy: proxy, noProxy: try NoProxyList(configuration.noProxy))
        try self.init(configuration: configuration, driver: driver,
                      scheduler: SystemScheduler(), random: SystemRandom(),
                      pressure: LinuxPressureMonitor(memoryThreshold: configuration.memoryPressureThreshold))
    }

    /// Injects the transfer layer, scheduler (clock and timers), randomness, disk-pressure thresholds (default: from the
    /// configuration's `minFreeDiskBytes` and 5 %) and the pressure monitor (default: real free space,
    /// checked before each attempt only, never memory pressure) — tests.
    init(configuration: EngineConfiguration, driver: TransferStarting, scheduler: Scheduler = SystemScheduler(),
         random: RandomSource = SystemRandom(), diskPressure: DiskPressure? = nil,
         pressure: PressureMonitor? = nil) throws {
        self.configuration = configuration
        egress = try EgressRules(configuration)
        let thresholds = diskPressure ?? DiskPressure(minFreeBytes: configuration.minFreeDiskBytes, minFreeFraction: 0.05)
        let monitor = pressure ?? DiskOnlyPressureMonitor()
        core = try EngineCore(configuration: configuration, driver: driver, scheduler: scheduler, random: random,
                              diskPressure: thresholds, pressure: monitor)
        recovery = try core.recover()
        core.startCluster()
        clusterReads = ClusterReads(core: core)
        clusterFeed = configuration.clusterDatabase.map { [core] in
            ClusterFeed(source: ClusterFeedStore(pool: $0.pool), feed: core.feed, scheduler: scheduler,
                        ignoring: configuration.coalesceIgnoreQuery)
        }
        clusterFeed?.start()
        core.scheduleRetention()
        // Cluster mode keeps callbacks in the cluster database; no SQLite file goes into the shared
        // directory (every replica would open and migrate the same one at once, over the network).
        let journalPath = configuration.clusterDatabase == nil ? core.store.stateDirectory + "/" + SQLiteStateStore.fileName : ":memory:"
        let dispatcher = try WebhookDispatcher(
            journal: WebhookJournal(path: journalPath),
            poster: CurlWebhookPoster(egress: egress, trust: Self.trust(of: driver)),
            scheduler: scheduler, random: random, egress: egress,
            lookup: { [weak core] id in core?.snapshot(id: id) })
        webhooks = dispatcher
        if let database = configuration.clusterDatabase {
            let cluster = ClusterWebhooks(pool: database.pool, ignoring: configuration.coalesceIgnoreQuery, scheduler: scheduler,
                                          owner: configuration.clusterReplica.owner + "/" + random.hex(byteCount: 6))
            dispatcher.lock.withLock { dispatcher.cluster = cluster }
        }
        core.locked {
            core.hooks.ended = { [weak dispatcher] snapshot in dispatcher?.downloadEnded(snapshot) }
            core.hooks.removed = { [weak dispatcher] id in dispatcher?.downloadRemoved(id: id) }
            core.hooks.tokenDropped = { [weak dispatcher] hash in dispatcher?.drop(tokenHash: hash) }
        }
        if let reads = clusterReads { core.locked { core.cluster?.evicted = { [weak reads] in reads?.evicted($0, completed: $1) } } }
        monitor.start(interval: configuration.pressureInterval) { [weak core] in core?.checkPressure() }
    }

    deinit {
        core.pressure.stop()
        clusterFeed?.stop()
        webhooks.lock.withLock { webhooks.cluster }?.stop()
        core.cluster?.keeper.stop()
    }

    /// Calls `handler` for every file purged (paused partials, cache files), in order, on an engine
    /// queue. The service logs each one.
    public func onPurge(_ handler: @escaping @Sendable (PurgeEvent) -> Void) {
        core.locked { core.purgeHandler = handler }
    }

    /// Registers a caller for `request.url` (its callback, if any, is `webhooks.register`ed by the
    /// service once this answered): joins the existing download for the normalised URL,
    /// resumes a paused one, answers from a stored file, or starts a new one. Never awaits and never
    /// waits for the disk: asking for `persistent` storage of a completed cache file moves it into the
    /// data area on the engine's work queue (it is served from where it is until then).
    /// Throws `invalidURL`, `urlCredentials`, `invalidChecksum`, `conflict`, `shuttingDown`,
    /// `destinationForbidden` when the URL's host is refused before any connection (see
    /// `EngineConfiguration.allowHosts`), or `tooManyCallers` when a running download already has
    /// `maxCallersPerDownload` callers. Cluster mode: answers once the new token is in the database,
    /// so every replica finds it at once.
    public func request(_ request: DownloadRequest) throws(EngineError) -> Enqueued {
        let request = try screened(request)
        let enqueued = try core.request(request)
        core.clusterPublishTokens()
        return enqueued
    }

    /// Withdraws the caller's interest. Returns the download's snapshot (state `paused` when it was
    /// the last caller of an unfinished download), or nil for an unknown or already-used token.
    /// Cluster mode: adopts a download nobody holds (`cancelling(token:)` throws when another holds it).
    public func cancel(token: String) -> DownloadSnapshot? {
        (try? cancelling(token: token)) ?? nil
    }

    /// `request` as a download takes it: its URL screened (`screenedURL`), and the `user:password@`
    /// the URL may carry (`allowURLCredentials`) moved into its headers (`URLCredentials`).
    /// `invalidHeaders` when the request also has an `Authorization` header.
    func screened(_ request: DownloadRequest) throws(EngineError) -> DownloadRequest {
        let (url, authorization) = URLCredentials.split(try screenedURL(request.url))
        var screened = request
        screened.url = url
        guard let authorization else { return screened }
        if request.headers.keys.contains(where: { $0.lowercased() == "authorization" }) {
            throw .invalidHeaders("the URL's user:password@ and an Authorization header cannot both be given")
        }
        screened.headers["Authorization"] = authorization
        return screened
    }

    /// `raw` normalised (`URLNormalizer`, credentials as configured) and passed by the egress
    /// rules: what a download, a reader and a probe fetch.
    func screenedURL(_ raw: String) throws(EngineError) -> String {
        let url = try URLNormalizer.normalize(raw, allowCredentials: configuration.allowURLCredentials).get()
        try egress.screen(url: url)
        return url
    }

    public func snapshot(id: String) -> DownloadSnapshot? {
        if let local = core.snapshot(id: id) { return local }  // not `??`: that copied the snapshot
        return clusterSnapshot(id: id)
    }

    /// Every download (or those in `state`), newest first. In cluster mode with those of the
    /// database (at most `ClusterReader.listLimit` of them, the filter applied by the database).
    public func list(state: DownloadState? = nil) -> [DownloadSnapshot] {
        list(state: state, after: nil, limit: ClusterReader.listLimit)
    }

    /// `list(state:)` for a page of at most `limit` after `position` (nil: from the newest): every
    /// download held here, and from the database (cluster mode) the `limit` newest after `position`
    /// of the others; the private ones (made with caller headers) only when `includingPrivate`. The
    /// caller cuts the page (the list's order is `ListPosition`'s). A single process hands out the
    /// page itself, in order, at most `limit`.
    public func list(state: DownloadState?, after position: ListPosition?, limit: Int, includingPrivate: Bool = true) -> [DownloadSnapshot] {
        if clusterReads == nil {
            return core.page(state: state, after: position, limit: limit, includingPrivate: includingPrivate)
        }
        let all = includingPrivate ? core.list() : core.list().filter { !$0.isPrivate }
        guard let state else { return clusterList(merging: all, after: position, limit: limit, includingPrivate: includingPrivate) }
        return clusterList(merging: all.filter { $0.state == state }, state: state, held: Set(all.map(\.id)), after: position,
                           limit: limit, includingPrivate: includingPrivate)
    }

    /// How many downloads are in each state (`/metrics`): all of them, also in cluster mode, where
    /// the database counts those this replica does not hold (while it is unreachable: only those held here).
    /// Also those here that ran out of disk space and wait for it (`reason: disk_full`), counted
    /// in the same pass.
    public func stateCounts() -> (states: [DownloadState: Int], waitingForSpace: Int) {
        guard let clusterReads else {
            let local = core.stateCounts(withIDs: false)
            return (local.counts, local.waitingForSpace)
        }
        let local = core.stateCounts(withIDs: true)
        return (clusterReads.stateCounts(merging: local.counts, held: local.ids), local.waitingForSpace)
    }

    /// Events for download `id`, starting with its current snapshot; nil for an unknown id.
    public func subscribe(id: String) -> DownloadSubscription? {
        core.subscribe(id: id).map(DownloadSubscription.init) ?? clusterSubscribe(id: id)
    }

    /// The stored file of a completed download; nil when unknown, not completed, or gone from disk.
    public func completedFile(id: String) -> CompletedFile? {
        core.completedFile(id: id) ?? clusterCompletedFile(id: id)
    }

    public var statistics: EngineStatistics {
        core.statistics
    }

    /// Stops every transfer, keeping partials and storing running downloads so they carry on
    /// after a restart; ends every subscription. Later requests fail with `shuttingDown`.
    /// Whether `shutdown` began: nothing starts or resumes any more.
    public var isShuttingDown: Bool { core.locked { core.shuttingDown } }

    /// Returns why the final state commit failed (nil: everything decided is stored): what
    /// changed since the last good commit is not there at the next start.
    @discardableResult
    public func shutdown() async -> String? {
        core.pressure.stop()
        clusterFeed?.stop()
        webhooks.lock.withLock { webhooks.cluster }?.stop()
        let uncommitted = await core.shutdown()
        core.clusterShutdown()
        (core.driver as? CurlTransferDriver)?.shutdown()
        return uncommitted?.description
    }
}

/// Events of one download for one subscriber, starting with the current snapshot. Progress is
/// conflated: a reader that falls behind (or runs late) gets the latest snapshot, and no progress
/// older than a lifecycle event waiting after it. Lifecycle events are kept. Ends after
/// `completed`/`failed`, on engine shutdown, or when the consuming task is cancelled. Dropping the
/// subscription unsubscribes.
public final class DownloadSubscription: AsyncSequence, Sendable {
    public typealias Element = DownloadEvent

    let queue: SubscriberQueue

    init(queue: SubscriberQueue) { self.queue = queue }

    deinit { queue.cancel() }

    /// Stops the subscription now (also done when the consuming task is cancelled).
    public func cancel() { queue.cancel() }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let subscription: DownloadSubscription

        public mutating func next() async -> DownloadEvent? {
            await subscription.queue.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(subscription: self) }

    /// What `poll` found.
    public enum Polled: Sendable, Equatable {
        case event(DownloadEvent)
        /// Nothing yet: the waker given to `poll` is called once there is something.
        case wait
        /// The subscription has ended.
        case end
    }

    /// The next event without waiting, for a consumer driven by something else (an event loop)
    /// instead of a task: `.wait` when none is ready, and then `waker` is called (once, on an engine
    /// thread: do little) as soon as one is. Events are settled as for `next()`: a progress older
    /// than a waiting lifecycle event is skipped, a late consumer gets the newest progress.
    public func poll(waker: @escaping @Sendable () -> Void) -> Polled {
        switch queue.poll(waker: waker) {
        case .event(let event): .event(event)
        case .wait: .wait
        case .end: .end
        }
    }
}
