import Foundation

/// The one owner of download state: coalescing, caller tokens, transfers, storage and subscribers.
///
/// - One download per normalised URL; every request gets its own caller token.
/// - Cancel is pause: when the last caller leaves, the transfer stops and the partial is kept
///   (with its validator) for a later `Range`/`If-Range` resume under the same id.
/// - State is journaled in the state area. After a restart, downloads that were running carry on
///   without callers (held by the service until a caller joins); paused ones stay paused;
///   caller tokens do not survive a restart, downloads do.
public final class DownloadEngine: Sendable {
    public let configuration: EngineConfiguration
    let core: EngineCore
    /// What start-up recovered from the journal.
    let recovery: EngineCore.RecoveryReport
    /// The SSRF guard's rules, checked on every request before it reaches the core.
    let egress: EgressRules

    /// Creates the storage areas, loads the state journal and carries on downloads that were running.
    /// Throws `HostRuleError` for a bad `allowHosts`/`denyHosts` entry.
    public convenience init(configuration: EngineConfiguration) throws {
        try self.init(configuration: configuration, driver: makeDefaultTransferDriver(configuration),
                      clock: SystemClock(), random: SystemRandom(), diskPressure: DiskPressure())
    }

    /// Injects the transfer layer, clock, randomness and disk-pressure thresholds (tests).
    init(configuration: EngineConfiguration, driver: TransferStarting, clock: EngineClock = SystemClock(),
         random: RandomSource = SystemRandom(), diskPressure: DiskPressure = DiskPressure()) throws {
        self.configuration = configuration
        egress = try EgressRules(configuration)
        core = try EngineCore(configuration: configuration, driver: driver, clock: clock, random: random,
                              diskPressure: diskPressure)
        recovery = core.recover()
    }

    /// Registers a caller for `request.url`: joins the existing download for the normalised URL,
    /// resumes a paused one, answers from a stored file, or starts a new one. Never awaits and never
    /// waits for the disk: asking for `persistent` storage of a completed cache file moves it into the
    /// data area on the engine's work queue (it is served from where it is until then).
    /// Throws `invalidURL`, `urlCredentials`, `invalidChecksum`, `conflict`, `shuttingDown`,
    /// `destinationForbidden` when the URL's host is refused before any connection (see
    /// `EngineConfiguration.allowHosts`), or `tooManyCallers` when a running download already has
    /// `maxCallersPerDownload` callers.
    public func request(_ request: DownloadRequest) throws(EngineError) -> Enqueued {
        let url = try URLNormalizer.normalize(request.url, allowCredentials: configuration.allowURLCredentials).get()
        try egress.screen(url: url)
        return try core.request(request)
    }

    /// Withdraws the caller's interest. Returns the download's snapshot (state `paused` when it was
    /// the last caller of an unfinished download), or nil for an unknown or already-used token.
    public func cancel(token: String) -> DownloadSnapshot? {
        core.cancel(token: token)
    }

    public func snapshot(id: String) -> DownloadSnapshot? {
        core.snapshot(id: id)
    }

    /// Every download, newest first.
    public func list() -> [DownloadSnapshot] {
        core.list()
    }

    /// Events for download `id`, starting with its current snapshot; nil for an unknown id.
    public func subscribe(id: String) -> DownloadSubscription? {
        core.subscribe(id: id).map(DownloadSubscription.init)
    }

    /// The stored file of a completed download; nil when unknown, not completed, or gone from disk.
    public func completedFile(id: String) -> CompletedFile? {
        core.completedFile(id: id)
    }

    public var statistics: EngineStatistics {
        core.statistics
    }

    /// Stops every transfer, keeping partials and journaling running downloads so they carry on
    /// after a restart; ends every subscription. Later requests fail with `shuttingDown`.
    public func shutdown() async {
        await core.shutdown()
        (core.driver as? CurlTransferDriver)?.shutdown()
    }
}

/// Events of one download for one subscriber. Progress is conflated (a slow reader sees the latest
/// snapshot); lifecycle events are kept. Ends after `completed`/`failed`, on engine shutdown, or
/// when the consuming task is cancelled. Dropping the subscription unsubscribes.
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
}
