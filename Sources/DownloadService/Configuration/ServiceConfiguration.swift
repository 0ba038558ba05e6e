import DownloaderEngine
import Foundation

/// Everything the service is started with. Flags win over `DOWNLOAD_SERVICE_*` environment variables,
/// which win over the defaults documented in `--help`.
struct ServiceConfiguration: Sendable, Equatable {
    /// The largest request body read: `POST /downloads` sends a few KiB (a URL, headers and a
    /// callback of 8 KiB each at most); bodies are read before routing, so every connection may
    /// hold this much.
    static let maxRequestBodyBytes = 64 * 1024

    /// Address to listen on (default `127.0.0.1`; the Docker image uses `0.0.0.0`).
    var host = "127.0.0.1"
    /// Port to listen on; 0 picks a free one (default 8080).
    var port = 8080
    /// Completed `cache` files (default `$XDG_CACHE_HOME/download-service`).
    var cacheDirectory: String
    /// Completed `persistent` files (default `$XDG_DATA_HOME/download-service`).
    var dataDirectory: String
    /// Partial files and the state database `state.db` (default `$XDG_STATE_HOME/download-service`).
    var stateDirectory: String
    /// Transfers at once (default 4).
    var maxConcurrent = 4
    /// `--max-connections-per-download` (segmented fetch; 1: off).
    var maxConnectionsPerDownload = 1
    /// `--segment-probe-seconds` (whether more connections pay; 0: all at once).
    var segmentProbeSeconds = 0.25
    /// Largest file accepted in bytes; nil = no limit (default).
    var maxFileSize: Int64?
    /// Bytes the cache area may hold; nil = no limit (default).
    var cacheMaxBytes: Int64?
    /// When set, every endpoint but `/healthz` needs `Authorization: Bearer <token>`.
    var authToken: String?
    /// `--auth-token-file`: where `authToken` is read from at start (wins over `authToken`).
    var authTokenFile: String?
    /// `--admin-token`: guards `/admin/*` (without it `/admin/*` follows `authToken`).
    var adminToken: String?
    /// `--admin-token-file`: where `adminToken` is read from at start (wins over `adminToken`).
    var adminTokenFile: String?
    /// `DOWNLOAD_SERVICE_*` variables that name no option (a misspelt one, or a `_FILE` form the
    /// service does not have): logged at start as a warning, by name.
    var unknownVariables: [String] = []
    /// `--cache-ttl`: seconds a completed cache file is kept after it was last asked for; nil = off.
    var cacheTTL: Double?
    /// Key of the callbacks' `X-Signature-256` (`--webhook-secret`), or the file holding it.
    var webhookSecret: String?
    var webhookSecretFile: String?
    /// Allow origins on loopback and private networks (default false).
    var allowPrivateNetworks = false

    // MARK: SSRF guard and API limits (security)

    /// `--allow-host` entries (host names, `*.domain`, addresses, CIDRs); any entry turns on
    /// allow-list mode: only what they match is fetched (default none).
    var allowHosts: [String] = []
    /// `--deny-host` entries, same forms; they always win (default none).
    var denyHosts: [String] = []
    /// Accept `user:password@` in URLs (default false: 400 `url_credentials`).
    var allowURLCredentials = false
    /// Query parameter names left out of the coalescing key (`--coalesce-ignore-query`; default none).
    var coalesceIgnoreQuery: [String] = []
    /// Open client connections at most; more are answered 503 and closed (default 16 384).
    var maxConnections = 16_384
    /// Open client connections per client IP at most; nil = no per-IP limit (default).
    var maxConnectionsPerIP: Int?
    /// Progress streams open at once per download (default 16 384); more get 503 `too_many_subscribers`.
    var maxSubscribersPerDownload = 16_384
    /// `GET /events` streams at once (`--max-event-subscribers`).
    var maxEventSubscribers = 1_024
    /// Live caller tokens of unfinished downloads per client IP (default 1 000); nil = no limit. More get 429 `too_many_downloads`.
    var maxDownloadsPerClient: Int? = 1_000
    // Origins: TLS, the upstream proxy, timeouts.
    /// PEM CA certificates trusted on top of the system's roots (default none).
    var caFile: String?
    /// The upstream proxy URL, credentials included (never logged: see `redactedProxy`).
    var upstreamProxy: String?
    /// Hosts fetched directly despite the proxy.
    var noProxy: [String] = []
    /// Seconds to connect (default 10).
    var connectTimeout: Double = 10
    /// Seconds from a request to the end of its response head (default 30).
    var headTimeout: Double = 30
    /// The least severe log line written (default info).
    var logLevel: Logger.Level = .info
    /// The log's format; nil: text when stderr is a terminal, else JSON.
    var logFormat: LogFormat?

    /// The proxy URL as it may be shown.
    var redactedProxy: String? {
        upstreamProxy.map { url in (try? UpstreamProxy.parse(url).get())?.redacted ?? "(invalid)" }
    }

    // Durability and pressure (defaults from `EngineConfiguration`).
    /// Seconds between checkpoints of a running transfer (default 1).
    var checkpointInterval: Double = 1
    /// Unsynced bytes that trigger a checkpoint (default 4 MiB).
    var checkpointBytes: Int64 = 4 << 20
    /// Free bytes each storage area should keep before purging starts (default 1 GiB).
    var minFreeDiskBytes: Int64 = 1 << 30
    /// Seconds a download that ran out of disk space waits for space before it fails `disk_full` (0: at once).
    var diskFullWait: Double = 600
    /// Seconds a paused download keeps its partial (default 24 h).
    var pausedTTL: Double = 86_400
    /// Cluster mode (`--cluster-db`, `--shared-dir`, …); off by default.
    var cluster = ClusterOptions()
    /// Crash tests only: `DOWNLOAD_SERVICE_TEST_CRASH_POINT` (see `CrashPoint`); never a flag.
    var testCrashPoint: CrashPoint?

    init(environment: [String: String] = [:]) {
        let engineDefaults = EngineConfiguration(environment: environment)
        cacheDirectory = engineDefaults.cacheDirectory.path
        dataDirectory = engineDefaults.dataDirectory.path
        stateDirectory = engineDefaults.stateDirectory.path
        testCrashPoint = environment["DOWNLOAD_SERVICE_TEST_CRASH_POINT"].flatMap(CrashPoint.init)
    }

    /// The engine settings this configuration implies.
    var engineConfiguration: EngineConfiguration {
        var c = EngineConfiguration(root: URL(fileURLWithPath: "/"))
        c.cacheDirectory = URL(fileURLWithPath: cacheDirectory)
        c.dataDirectory = URL(fileURLWithPath: dataDirectory)
        c.stateDirectory = URL(fileURLWithPath: stateDirectory)
        if let shared = cluster.areas {
            c.cacheDirectory = URL(fileURLWithPath: shared.cache)
            c.dataDirectory = URL(fileURLWithPath: shared.data)
            c.stateDirectory = URL(fileURLWithPath: shared.state)
        }
        c.maxConcurrentTransfers = maxConcurrent
        c.maxConnectionsPerDownload = maxConnectionsPerDownload
        c.segmentProbeSeconds = segmentProbeSeconds
        c.maxFileSize = maxFileSize
        c.cacheMaxBytes = cacheMaxBytes
        c.cacheTTL = cacheTTL
        c.maxIdlePartialsPerClient = maxDownloadsPerClient ?? 0
        c.allowPrivateNetworks = allowPrivateNetworks
        c.allowHosts = allowHosts
        c.denyHosts = denyHosts
        c.allowURLCredentials = allowURLCredentials
        c.coalesceIgnoreQuery = Set(coalesceIgnoreQuery)
        c.caFile = caFile
        c.upstreamProxy = upstreamProxy
        c.noProxy = noProxy
        c.connectTimeout = connectTimeout
        c.headTimeout = headTimeout
        applyRetryTiming(to: &c)
        c.checkpointInterval = checkpointInterval
        c.checkpointBytes = checkpointBytes
        c.minFreeDiskBytes = minFreeDiskBytes
        c.diskFullWait = diskFullWait
        c.pausedTTL = pausedTTL
        c.testCrashPoint = testCrashPoint
        return c
    }

    // Retry timing (fault-injection soaks use short ones; the defaults are the engine's).
    /// Seconds without a byte before a transfer reconnects and resumes (default 30).
    var stallTimeout: Double = 30
    /// Bytes per second a download must bring over each `stallTimeout` (its connections share it),
    /// else it reconnects and resumes; 0 = no such limit (default).
    var minSpeed: Int64 = 0
    /// First retry delay in seconds; doubles each attempt, with jitter (default 0.5).
    var retryBaseDelay: Double = 0.5
    /// Attempts per download before it fails with `retries_exhausted` (default 6).
    var maxAttempts = 6
    /// Seconds between returns of freed heap memory to the kernel (`malloc_trim`); 0 = off (default 5).
    var memoryTrimInterval: Double = 5
    /// `--shutdown-delay`: seconds between a SIGTERM and the stop, `/readyz` answering 503 and
    /// everything else as usual (default 0: stop at once).
    var shutdownDelay: Double = 0
    /// `--serving-nice`: nice value of the serving loops (`ServerConfiguration.bulkLoopNice`), the
    /// HTTP threads long bodies move to (SSE streams, file and `/fetch` bodies) once the API loop
    /// answered (default 10). The transfers, hashing and writing every caller shares, and the API
    /// loop, keep the process's priority: when copies compete with the work they copy for the
    /// cores, watchers and readers lag a little instead of slowing the fetch for everyone, while
    /// short answers keep their latency (BENCHMARKS.md).
    var servingNice = 10
    /// `--serving-cpu-share`: percent of a core each serving loop keeps while a CPU holds the
    /// fetches back (`BulkLoopYield`, told by `EngineConfiguration.onCPUWait`; default 20;
    /// 100: the loops never give way). A nice value leaves the fetch queued behind a loop in the
    /// middle of a `sendfile`; a loop that sleeps gives the core back (BENCHMARKS.md).
    var servingCPUShare = 20
    /// `--serving-loops`: how many serving loops (`ServerConfiguration.bulkLoopCount`, default 1;
    /// 0: every body is written by the loop that answered, at the process's priority).
    var servingLoops = 1

    private func applyRetryTiming(to c: inout EngineConfiguration) {
        c.stallTimeout = stallTimeout
        c.minSpeed = minSpeed
        c.retryBaseDelay = retryBaseDelay
        c.maxAttempts = maxAttempts
    }
}
