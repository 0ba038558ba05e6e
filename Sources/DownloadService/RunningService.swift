import DownloaderEngine
import CLinux
import Foundation
import MiniHTTPServer
import Synchronization

/// The engine and the HTTP server, started together and stopped together.
final class RunningService: Sendable {
    let engine: DownloadEngine
    let server: HTTPServer
    let logger: Logger
    private let memoryTrimmer: MemoryTrimmer?
    /// Single process: the storage areas are this service's alone while it runs.
    private let areaLocks: [StateDirectoryLock]
    /// `--shutdown-delay`, and what `/readyz` reads of the stop.
    private let drain: ShutdownDrain

    private init(engine: DownloadEngine, server: HTTPServer, logger: Logger, memoryTrimmer: MemoryTrimmer?,
                 areaLocks: [StateDirectoryLock], drain: ShutdownDrain) {
        self.engine = engine
        self.server = server
        self.logger = logger
        self.memoryTrimmer = memoryTrimmer
        self.areaLocks = areaLocks
        self.drain = drain
    }

    /// Opens the storage areas, starts the engine and binds the server. The first log line says
    /// where the service listens and where it keeps files.
    static func start(_ configuration: ServiceConfiguration, logger: Logger, drain: ShutdownDrain,
                      environment: [String: String] = ProcessInfo.processInfo.environment) throws -> RunningService {
        let openFiles = OpenFileLimit.raiseToHardLimit()
        let webhookSecret: [UInt8]?
        do throws(CommandLineOptions.ParseError) {
            webhookSecret = try configuration.webhookSecretBytes()
        } catch {
            throw ServiceStartError(message: error.message)
        }
        var engineConfiguration = configuration.engineConfiguration
        // Each download's story, purges included, one line per step (`StoryLine`).
        engineConfiguration.storyteller = { story in logger.story(story) }
        // The port is bound first (clients wait in the backlog meanwhile): cluster mode advertises it.
        let metrics = ServiceMetrics()
        let serving = ServingAPI()
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        serverConfiguration.maxConnections = configuration.maxConnections
        serverConfiguration.maxConnectionsPerIP = configuration.maxConnectionsPerIP
        // A liveness probe refused at the connection limit would have the process killed.
        serverConfiguration.answeredBeyondLimit = ["/healthz", "/readyz"]
        serverConfiguration.maxBodyBytes = ServiceConfiguration.maxRequestBodyBytes
        serverConfiguration.bulkLoopNice = configuration.servingNice
        serverConfiguration.bulkLoopCount = configuration.servingLoops
        if configuration.servingCPUShare < 100 && configuration.servingLoops > 0 {
            // Held 0.1 s from each word of the meter (told at most every 20 ms, and while a CPU holds
            // the fetch back, in nearly every window even with the loops giving way): longer, and
            // watchers wait for it after the fetch (section 5 at 0.5 s: the completed event's
            // spread 528 -> 757 ms, progress lag p99 512 -> 1 008 ms).
            let yield = BulkLoopYield(share: Double(configuration.servingCPUShare) / 100)
            serverConfiguration.bulkLoopYield = yield
            engineConfiguration.onCPUWait = { yield.request(seconds: 0.1) }
        }
        serverConfiguration.errorRenderer = ServerErrorJSON.response
        // Through the log's queue: a loop never waits on a full standard error.
        serverConfiguration.diagnostics = { logger.warning($0) }
        serverConfiguration.accessLog = { entry in
            metrics.record(status: entry.status, bytes: entry.bytes, isFile: ServiceMetrics.servesFile(path: entry.path, status: entry.status))
            logger.request(entry)
        }
        let server = HTTPServer(configuration: serverConfiguration) { request in await serving.respond(request) }
        let port = try server.bind()
        let cluster = try ClusterStart.connect(configuration, logger: logger)
        engineConfiguration.clusterDatabase = cluster
        engineConfiguration.clusterReplica = ClusterStart.replica(configuration, port: port)
        let areas = [("--cache-dir", engineConfiguration.cacheDirectory), ("--data-dir", engineConfiguration.dataDirectory),
                     ("--state-dir", engineConfiguration.stateDirectory)]
        if cluster != nil {
            try SharedAreaMarker.mark(areas.map(\.1))
        } else {
            try SharedAreaMarker.refuseMarked(areas.map { (option: $0.0, directory: $0.1) })
        }
        var areaLocks: [StateDirectoryLock] = []
        if cluster == nil {
            areaLocks = [try StateDirectoryLock.acquire(engineConfiguration.stateDirectory)]
            let (locks, unlockable) = try StateDirectoryLock.acquireAreas([("--cache-dir", engineConfiguration.cacheDirectory),
                                                                          ("--data-dir", engineConfiguration.dataDirectory)])
            areaLocks += locks
            for directory in unlockable {
                logger.warning("this directory's filesystem takes no locks: another service sharing it would not be refused", ["directory": directory])
            }
        }
        let engine = try DownloadEngine(configuration: engineConfiguration)
        for path in engine.stateSetAside {
            let damage = path.contains("/state.db.damaged") ? engine.stateDamage : nil
            logger.error("state file damaged or unreadable: renamed aside, started without the downloads it held;"
                         + " no file is swept while it is kept", ["keptAt": path, "reason": JSON.orNull(damage)])
        }
        engine.onStateCommitHealth { failure in
            if let failure {
                logger.error("state commits failing: changes are kept in memory and retried every second"
                             + " (/readyz answers 503 meanwhile)", ["reason": failure])
            } else {
                logger.info("state commits succeed again", [:])
            }
        }
        for path in engine.damagedStatesKeptEarlier {
            logger.warning("a damaged state database is kept: no orphan file is swept until it is removed", ["keptAt": path])
        }
        if let imported = engine.importedJournal, let keptAt = imported.keptAt {
            logger.error("imported the journal of an earlier release, but for entries it could not read: kept aside, files not swept",
                         ["downloads": imported.downloads, "skipped": imported.skipped, "keptAt": keptAt])
        } else if let imported = engine.importedJournal {
            logger.info("imported the journal of an earlier release, then deleted it", ["downloads": imported.downloads])
        }
        for path in engine.journalsKeptEarlier {
            logger.warning("a journal not wholly imported is kept: no orphan file is swept until it is removed", ["keptAt": path])
        }
        engine.webhooks.start(WebhookSettings(
            render: { WebhookBody.render(event: $0, deliveryID: $1, snapshot: $2) }, secret: webhookSecret,
            userAgent: "download-service/\(ServiceVersion.current)", report: { logger.webhook($0) },
            journalFailed: { logger.error($0, [:]) }))
        var api = DownloadAPI(engine: engine, metrics: metrics, auth: configuration.authToken.map(BearerAuth.init(token:)))
        api.drain = drain
        api.adminAuth = configuration.adminToken.map(BearerAuth.init(token:))
        api.fileLinks = FileLink(secret: engine.derivedSecret(label: "file link"), tokens: [configuration.authToken, configuration.adminToken])
        api.onlyLocalHostNames = configuration.callersNeedNoToken && ServiceConfiguration.isLoopback(configuration.host)
        api.subscriberQuota = SubscriberQuota(limit: configuration.maxSubscribersPerDownload)
        api.eventSubscriberQuota = SubscriberQuota(limit: configuration.maxEventSubscribers)
        api.cluster = cluster
        if cluster != nil { api.databaseWork = DatabaseWorkers(threads: DatabaseWorkers.threads(poolSize: configuration.cluster.poolSize)) }
        let advertised = cluster == nil ? nil : engineConfiguration.clusterReplica.advertiseURL
        api.forwarding.signing = ClusterStart.signing(cluster, logger: logger)
        api.forwarding.forwarder = PeerForwarder(replicaURL: advertised, settings: PeerForwarder.Settings(
            stallTimeout: engineConfiguration.stallTimeout + 10), signing: api.forwarding.signing)
        api.callerQuota = ClusterStart.callerLimit(configuration.maxDownloadsPerClient, cluster, engine: engine)
        serving.respond = { [api] request in await api.respond(to: request) }
        _ = try server.start()
        let shownHost = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let origins: [String: Any] = [
            "connectTimeout": configuration.connectTimeout, "headTimeout": configuration.headTimeout,
            "caFile": JSON.orNull(configuration.caFile), "upstreamProxy": JSON.orNull(configuration.redactedProxy),
            "caCertificates": JSON.orNull(engine.trustedCertificateCount),
            "noProxy": configuration.noProxy,
            // Never used: only --upstream-proxy is. Their names (never values), so nobody wonders.
            "ignoredProxyVariables": CommandLineOptions.ignoredProxyVariables(in: environment),
        ]
        logger.info("listening", origins.merging([
            "host": configuration.host, "port": port, "url": "http://\(shownHost):\(port)",
            "cacheDir": engineConfiguration.cacheDirectory.path, "dataDir": engineConfiguration.dataDirectory.path,
            "stateDir": engineConfiguration.stateDirectory.path, "authRequired": configuration.authToken != nil,
            "adminAuthRequired": configuration.adminToken != nil || configuration.authToken != nil,
            "cacheTTL": JSON.orNull(configuration.cacheTTL),
            "allowPrivateNetworks": configuration.allowPrivateNetworks,
            "webhooksSigned": configuration.webhookSecret != nil || configuration.webhookSecretFile != nil,
            "allowHosts": configuration.allowHosts, "denyHosts": configuration.denyHosts,
            "maxConnections": configuration.maxConnections, "openFileLimit": openFiles.map { Int($0.soft) } ?? -1,
        ]) { $1 })
        if configuration.isOpenBeyondLoopback {
            let reach = configuration.adminToken == nil ? "start downloads and use /admin" : "start downloads and read files"
            logger.warning("listening beyond loopback without a caller token: whoever reaches this port may \(reach)"
                           + " (set --auth-token and --admin-token, or DOWNLOAD_SERVICE_AUTH_TOKEN and DOWNLOAD_SERVICE_ADMIN_TOKEN)",
                           ["host": configuration.host])
        }
        if !configuration.unknownVariables.isEmpty {
            logger.warning("environment variables that name no option were ignored (misspelt?)",
                           ["variables": configuration.unknownVariables])
        }
        if let openFiles, openFiles.soft < UInt64(configuration.maxConnections) + 256 {
            // Accepting pauses briefly on EMFILE instead of answering 503: worth knowing at start.
            logger.warning("open-file limit below --max-connections", [
                "openFileLimit": Int(openFiles.soft), "maxConnections": configuration.maxConnections,
            ])
        }
        return RunningService(engine: engine, server: server, logger: logger,
                              memoryTrimmer: MemoryTrimmer(interval: configuration.memoryTrimInterval), areaLocks: areaLocks,
                              drain: drain)
    }

    /// Stops accepting, finishes in-flight requests, pauses transfers (stored, so they carry on
    /// at the next start), then exits 0; 1 when the final state commit failed (what changed since
    /// the last good commit is not there at the next start). Called once, for the first shutdown
    /// signal. A SIGTERM first waits `--shutdown-delay` seconds serving as usual, `/readyz`
    /// answering 503 (an operator's Ctrl-C, SIGINT, does not wait; nor does a second signal).
    func shutDownAndExit(signal: Int32) {
        let delay = drain.delay(after: signal)
        logger.info("shutting down", ["signal": Int(signal), "delaySeconds": delay])
        Task {
            await drain.begin(delay: delay)
            async let serverStopped: Void = server.shutdown()
            async let engineStopped = engine.shutdown()
            let (_, uncommitted) = await (serverStopped, engineStopped)
            if let uncommitted {
                logger.error("stopped without storing the last changes: the state database refused them", ["error": uncommitted])
                logger.flush()
                exit(1)
            }
            logger.info("stopped")
            logger.flush()
            exit(0)
        }
    }

    /// A shutdown signal after the first: during `--shutdown-delay` it ends the delay (the graceful
    /// stop starts now); during the stop it exits at once (status 128 + the signal), without
    /// waiting for it; what was committed last is what the next start finds.
    static func signalledAgain(signal: Int32, drain: ShutdownDrain, logger: Logger) {
        if drain.cutDelay() {
            logger.info("another shutdown signal: stopping now, without the rest of the delay", ["signal": Int(signal)])
        } else {
            exitAtOnce(signal: signal, logger: logger)
        }
    }

    private static func exitAtOnce(signal: Int32, logger: Logger) {
        logger.warning("another shutdown signal: exiting at once", ["signal": Int(signal)])
        logger.flush()
        _exit(128 + signal)
    }
}

/// Turns the first of some signals into one shutdown. Set up before anything starts, with handlers
/// in place when `init` returns (a C handler writing to a pipe that a thread reads), so a signal that
/// arrives while the service is still starting is kept, not lost or fatal, and acted on as soon as
/// `whenSignalled` gives the action. A SIGTERM or SIGINT after the first signal runs `repeated`
/// (an operator's second Ctrl-C: stop waiting); a repeated SIGHUP (a closing terminal's) does not.
final class ShutdownSignals: Sendable {
    private struct State {
        var received: Int32?
        var action: (@Sendable (Int32) -> Void)?
    }

    private let state = Mutex(State())
    private let repeated: @Sendable (Int32) -> Void

    /// Fails only if the pipe or a handler cannot be set up (or when called twice in a process).
    init?(_ signals: [Int32], repeated: @escaping @Sendable (Int32) -> Void) {
        self.repeated = repeated
        let fd = signals.withUnsafeBufferPointer { clinux_catch_signals($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { return nil }
        let thread = Thread { [self] in
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n == 1 { received(Int32(byte)) } else if n == 0 || errno != EINTR { return }
            }
        }
        thread.name = "shutdown-signals"
        thread.start()
    }

    private func received(_ number: Int32) {
        let (action, again) = state.withLock { s -> ((@Sendable (Int32) -> Void)?, Bool) in
            guard s.received == nil else { return (nil, true) }
            s.received = number
            return (s.action, false)
        }
        if again {
            if number != SIGHUP { repeated(number) }
            return
        }
        action?(number)
    }

    /// Runs `action` on the first signal, at once if one already came.
    func whenSignalled(_ action: @escaping @Sendable (Int32) -> Void) {
        let pending = state.withLock { s -> Int32? in
            s.action = action
            return s.received
        }
        if let pending { action(pending) }
    }
}

/// The API the server's handlers answer with: the server is bound before the engine starts (so
/// that cluster mode knows the port it advertises), and this is set once before the server serves.
private final class ServingAPI: @unchecked Sendable {
    /// Set once, before the server accepts its first connection. A closure holding the API, so
    /// that each request borrows it: reading the struct from a `var` copied it (and retained its
    /// every field) per request.
    var respond: (@Sendable (Request) async -> Response)!
}
