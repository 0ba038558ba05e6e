import Foundation

/// Settings for `DownloadEngine`. Every field has a documented default.
public struct EngineConfiguration: Sendable {
    /// Partial files and the state database `state.db` (default `$XDG_STATE_HOME/download-service`,
    /// i.e. `~/.local/state/download-service`).
    public var stateDirectory: URL
    /// Completed files stored as `cache` (default `$XDG_CACHE_HOME/download-service`).
    public var cacheDirectory: URL
    /// Completed files stored as `persistent` (default `$XDG_DATA_HOME/download-service`).
    public var dataDirectory: URL
    /// Transfers running at once; the rest wait, shared fairly among clients (`TransferSlots`, default 4).
    public var maxConcurrentTransfers: Int = 4
    /// Ranged connections one download may use at most (segmented fetch, `DownloadRequest.connections`);
    /// default 1: off unless the operator allows more (more connections to one origin is what gets
    /// clients banned). Each extra connection counts within its download's transfer slot.
    public var maxConnectionsPerDownload: Int = 1
    /// Seconds a segmented download runs on one connection before a second one probes whether more
    /// connections bring more bytes per second, and seconds that probe measures (`ConnectionProbe`;
    /// default 0.25). Every granted connection opens only when they do (an origin that caps each
    /// connection); else the download stays on one. 0: every granted connection opens at once.
    public var segmentProbeSeconds: Double = 0.25
    /// The smallest segment (`SegmentPlanner.minimumSegment`, 8 MiB); tests make it smaller.
    var minimumSegmentBytes: Int64 = SegmentPlanner.minimumSegment
    /// Largest file accepted, in bytes; nil means no limit (default nil).
    public var maxFileSize: Int64? = nil
    /// Bytes the cache area may hold before the oldest cache files and paused partials are purged;
    /// nil means no limit (default nil).
    public var cacheMaxBytes: Int64? = nil
    /// Seconds to establish a connection: name lookup, TCP, TLS handshake, an upstream proxy's tunnel
    /// (default 10). Expiry is retried; the last attempt's expiry fails with `connect_timeout`.
    public var connectTimeout: Double = 10
    /// Seconds from sending a request to the end of its response head, in total (not an idle timer;
    /// default 30). Expiry is retried; the last attempt's expiry fails with `head_timeout`.
    public var headTimeout: Double = 30
    /// Seconds without a body byte, once the head arrived, before the transfer reconnects and resumes (default 30).
    public var stallTimeout: Double = 30
    /// Body bytes per second a download must bring over each `stallTimeout` (a segmented one's
    /// connections share it), else it reconnects and resumes as after a stall (0, the default: no
    /// such limit; a trickle then holds its slot).
    public var minSpeed: Int64 = 0
    /// Seconds a download that ran out of disk space waits for space, its bytes kept, looking
    /// every 5 s (`SpaceWait`), before it fails `disk_full` (default 600; 0: it fails at once).
    public var diskFullWait: Double = 600
    /// Attempts per download before it fails (default 6).
    public var maxAttempts: Int = 6
    /// First retry delay in seconds; doubles each attempt, with jitter (default 0.5).
    public var retryBaseDelay: Double = 0.5
    /// Longest delay between attempts, including a `Retry-After` (default 30).
    public var retryMaxDelay: Double = 30
    /// Redirects followed per attempt (default 10).
    public var maxRedirects: Int = 10
    /// EWMA time constant for the rate, in seconds (default 3).
    public var rateTimeConstant: Double = 3
    /// Least interval between progress events per download, in seconds (default 0.1).
    public var progressInterval: Double = 0.1
    /// Allow origins on loopback, private, link-local and other non-public addresses (default false).
    public var allowPrivateNetworks: Bool = false
    /// Live caller tokens one download may have at once (default 10 000). While the download is
    /// queued or running, a request beyond that fails with `EngineError.tooManyCallers` (code
    /// `too_many_callers`) until callers cancel. For a completed or failed download an arbitrary older
    /// token is dropped instead (its `cancel` then answers nil), since such tokens keep nothing
    /// running. Tokens also go when their caller cancels or when the download is forgotten; they survive restarts.
    public var maxCallersPerDownload: Int = 10_000
    /// `HEAD` probes to origins (`DownloadEngine.probe`, for `HEAD /fetch` of a URL nothing holds)
    /// running at once (default 64). Beyond it a probe fails at once with `EngineError.busy`: each
    /// holds an outbound connection for up to the connect and head timeouts.
    public var maxConcurrentProbes: Int = 64
    /// Failed downloads remembered (in memory and in the state database) at most; beyond it the oldest
    /// failed ones are forgotten, with any kept partial (default 1 000). Completed downloads are
    /// bounded by their files on disk (a vanished file drops the entry) and, for the cache area, by
    /// `cacheMaxBytes`; running, queued and paused ones by the callers that made them.
    public var maxFailedDownloads: Int = 1_000
    /// Seconds a failed download is remembered after it failed (default 7 days); a caller joining it
    /// restarts it. Older failed downloads are forgotten when another fails and at start-up.
    public var failedRetention: Double = 7 * 86_400
    /// `User-Agent` sent upstream.
    public var userAgent: String = "download-service/1.0"

    // MARK: SSRF guard and upstream caps (security)

    /// Egress allow-list (`--allow-host`): host names (`origin.example.com`, `*.example.com`), address
    /// literals or networks (`10.0.0.0/8`, `fc00::/7`), each optionally with `:port` (not networks).
    /// When non-empty, only what an entry matches is fetched, and a match also lifts the private-range
    /// ban for it (default empty: any public address).
    public var allowHosts: [String] = []
    /// Egress deny-list (`--deny-host`), same forms as `allowHosts`; always wins (default empty).
    public var denyHosts: [String] = []
    /// Accept `user:password@` in URLs: taken out of the URL and made the caller's
    /// `Authorization: Basic` header (`URLCredentials`), so the download is private to its callers
    /// and the password is never stored or shown. Default false: such URLs fail with `url_credentials`.
    public var allowURLCredentials: Bool = false
    /// Query parameter names left out of the coalescing key (`--coalesce-ignore-query`), matched
    /// exactly (case-sensitive), and redacted in snapshots and log lines: callers whose URLs differ
    /// only in them (signatures, expiry times) share one download, so a caller whose own signature
    /// has expired still receives the object another caller fetched (default empty).
    public var coalesceIgnoreQuery: Set<String> = []
    /// A PEM file of CA certificates trusted on top of the system's roots, for origins and an https
    /// upstream proxy (`--ca-file`; default nil). Read when the engine starts: a missing, unreadable
    /// or empty file makes `DownloadEngine(configuration:)` throw `TrustedCertificatesError`.
    /// Certificate verification itself is always on.
    public var caFile: String? = nil
    /// The upstream proxy every hop goes through (`--upstream-proxy`): `http://` or `https://`, with
    /// optional `user:password@` (sent as `Proxy-Authorization: Basic`, shown nowhere). nil (the
    /// default): connect directly; proxy variables of the environment are never used. The SSRF guard
    /// holds through it: each hop's host is resolved and vetted here and the proxy is asked to
    /// `CONNECT` to the vetted address (http origins too), so `allowHosts`/`denyHosts` work as without
    /// a proxy; the proxy's own address is not judged. A bad URL makes `DownloadEngine(configuration:)`
    /// throw `ProxyConfigurationError`.
    public var upstreamProxy: String? = nil
    /// Hosts fetched directly despite `upstreamProxy` (`--no-proxy`): names, `*.suffix`, addresses,
    /// CIDRs (matched against each hop's URL host as written). Default empty.
    public var noProxy: [String] = []
    /// Checks `upstreamProxy` and `noProxy`; the error never shows the proxy's credentials.
    public static func validateProxy(_ url: String?, noProxy: [String]) -> ProxyConfigurationError? {
        if let url, case .failure(let error) = UpstreamProxy.parse(url) { return error }
        do { _ = try NoProxyList(noProxy) } catch { return error }
        return nil
    }
    /// Bytes of response head accepted per attempt, all redirect hops together (default 64 KiB).
    /// More fails the download with `header_too_large`.
    public var maxResponseHeaderBytes: Int = 64 * 1024

    /// Checks `allowHosts` and `denyHosts`; the error names the first bad entry.
    public static func validateHostRules(_ entries: [String]) -> HostRuleError? {
        for entry in entries {
            if case .failure(let error) = EgressRule.parse(entry) { return error }
        }
        return nil
    }
    // MARK: Durability and pressure

    /// Seconds of writing after which a running transfer checkpoints: fdatasync of the partial, then
    /// the durable offset is committed to the state database (default 1). A crash loses at most what was not yet checkpointed.
    public var checkpointInterval: Double = 1
    /// Unsynced bytes after which a running transfer checkpoints, whatever the time (default 4 MiB).
    /// A checkpoint never blocks the transfer thread; while one is in flight, further ones are merged.
    public var checkpointBytes: Int64 = 4 << 20
    /// Free bytes each storage area's file system should keep (default 1 GiB; also low below 5 % of
    /// the file system). Below it, paused partials and then least-recently-used cache files are purged.
    public var minFreeDiskBytes: Int64 = 1 << 30
    /// Seconds a paused download is kept (default 24 h): then its partial is purged and the download
    /// forgotten. Paused downloads that keep no bytes are forgotten after the same time.
    public var pausedTTL: Double = 86_400
    /// Seconds a completed cache-area file is kept after it was last requested or served (its
    /// completion, a `request`, a reader joining, `completedFile`); then its download is removed
    /// (`removed` by retention), within the TTL plus the larger of 1 s and a tenth of it. Nil or 0: off.
    public var cacheTTL: Double?
    /// Paused downloads that keep no bytes remembered at most; beyond it the oldest are forgotten
    /// (default 1 000).
    public var maxEmptyPausedDownloads: Int = 1_000
    /// Partials one client (`DownloadRequest.clientGroup`) left that no caller's quota counts any
    /// more (paused ones nobody holds, failed ones) kept at most; beyond it that client's oldest
    /// are purged (`client_limit`) at the next pressure tick. 0: off (default; the service sets
    /// `--max-downloads-per-client`).
    public var maxIdlePartialsPerClient: Int = 0
    /// Seconds between pressure samples (memory PSI, cgroup memory events, free space; default 2).
    public var pressureInterval: Double = 2
    /// Snapshot items fresh `watchAll` watchers may hold, not yet read, all together (the
    /// operator's aside): a fresh one beyond it is refused until they read (`EventFeed`).
    public var eventSnapshotBudget: Int = EventFeed.snapshotBudget
    /// Told (on a hash lane or a transfer thread, at most every 20 ms: do little) while the fetches
    /// are held back by a CPU: in 20 ms, their hashing waited 1 ms or more for a core and their
    /// transfers 1 ms or more for a free buffer (`CPUWaitMeter`). The service asks its serving
    /// loops to give way. Default nil: nothing is timed.
    public var onCPUWait: (@Sendable () -> Void)? = nil
    /// PSI `some avg10` (percent of time stalled on memory) at or above which memory counts as
    /// under pressure (default 10).
    public var memoryPressureThreshold: Double = 10
    /// Cluster mode: the PostgreSQL database that holds the state instead of `state.db` (default nil:
    /// the single process, on SQLite).
    public var clusterDatabase: ClusterDatabase? = nil
    /// Cluster mode: this replica's owner id, advertised URL and lease TTL (`ClusterReplica`).
    public var clusterReplica = ClusterReplica()
    /// Cluster mode: the janitor sweeps the shared partial and cache areas for files no row names
    /// every this many seconds (default 60; `OrphanSweep`) and deletes those whose status changed
    /// at least `orphanMinimumAge` seconds ago (default 1 h: far longer than any replica takes to
    /// record a file it made), and the files of tombstoned downloads at once.
    public var orphanSweepInterval: Double = 60
    public var orphanMinimumAge: Double = 3_600
    /// Crash tests only: where the process SIGKILLs itself (default nil; see `CrashPoint`).
    public var testCrashPoint: CrashPoint? = nil
    /// Told every step of every download's life (`DownloadStory`), in the order the engine decided
    /// them, on whichever engine thread carries out the decision, never under the engine's lock:
    /// do little (the service queues a log line). Default nil: nobody is told.
    public var storyteller: (@Sendable (DownloadStory) -> Void)? = nil

    /// Directories from XDG variables in `environment`, with the XDG fallbacks under `HOME`.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let home = environment["HOME"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: NSHomeDirectory())
        func xdg(_ variable: String, _ fallback: String) -> URL {
            let base = environment[variable].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil }
                ?? home.appendingPathComponent(fallback)
            return base.appendingPathComponent("download-service")
        }
        self.stateDirectory = xdg("XDG_STATE_HOME", ".local/state")
        self.cacheDirectory = xdg("XDG_CACHE_HOME", ".cache")
        self.dataDirectory = xdg("XDG_DATA_HOME", ".local/share")
    }

    /// All three areas under one root (handy for tests): `root/state`, `root/cache`, `root/data`.
    public init(root: URL) {
        self.stateDirectory = root.appendingPathComponent("state")
        self.cacheDirectory = root.appendingPathComponent("cache")
        self.dataDirectory = root.appendingPathComponent("data")
    }
}
