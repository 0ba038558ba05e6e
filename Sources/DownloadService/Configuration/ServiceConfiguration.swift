import DownloaderEngine
import Foundation

/// Everything the service is started with. Flags win over `DOWNLOAD_SERVICE_*` environment variables,
/// which win over the defaults documented in `--help`.
struct ServiceConfiguration: Sendable, Equatable {
    /// Address to listen on (default `127.0.0.1`; the Docker image uses `0.0.0.0`).
    var host = "127.0.0.1"
    /// Port to listen on; 0 picks a free one (default 8080).
    var port = 8080
    /// Completed `cache` files (default `$XDG_CACHE_HOME/download-service`).
    var cacheDirectory: String
    /// Completed `persistent` files (default `$XDG_DATA_HOME/download-service`).
    var dataDirectory: String
    /// Partial files and the state journal (default `$XDG_STATE_HOME/download-service`).
    var stateDirectory: String
    /// Transfers at once (default 4).
    var maxConcurrent = 4
    /// Largest file accepted in bytes; nil = no limit (default).
    var maxFileSize: Int64?
    /// Bytes the cache area may hold; nil = no limit (default).
    var cacheMaxBytes: Int64?
    /// When set, every endpoint but `/healthz` needs `Authorization: Bearer <token>`.
    var authToken: String?
    /// Allow origins on loopback and private networks (default false).
    var allowPrivateNetworks = false

    // Durability and pressure (defaults from `EngineConfiguration`).
    /// Seconds between checkpoints of a running transfer (default 1).
    var checkpointInterval: Double = 1
    /// Unsynced bytes that trigger a checkpoint (default 4 MiB).
    var checkpointBytes: Int64 = 4 << 20
    /// Free bytes each storage area should keep before purging starts (default 1 GiB).
    var minFreeDiskBytes: Int64 = 1 << 30
    /// Seconds a paused download keeps its partial (default 24 h).
    var pausedTTL: Double = 86_400
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
        c.maxConcurrentTransfers = maxConcurrent
        c.maxFileSize = maxFileSize
        c.cacheMaxBytes = cacheMaxBytes
        c.allowPrivateNetworks = allowPrivateNetworks
        c.checkpointInterval = checkpointInterval
        c.checkpointBytes = checkpointBytes
        c.minFreeDiskBytes = minFreeDiskBytes
        c.pausedTTL = pausedTTL
        c.testCrashPoint = testCrashPoint
        return c
    }
}
