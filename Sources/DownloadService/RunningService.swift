import DownloaderEngine
import Foundation
import MiniHTTPServer

/// The engine and the HTTP server, started together and stopped together.
final class RunningService: Sendable {
    let engine: DownloadEngine
    let server: HTTPServer
    let logger: Logger
    private let signalSources = SignalSources()
    private let memoryTrimmer: MemoryTrimmer?

    private init(engine: DownloadEngine, server: HTTPServer, logger: Logger, memoryTrimmer: MemoryTrimmer?) {
        self.engine = engine
        self.server = server
        self.logger = logger
        self.memoryTrimmer = memoryTrimmer
    }

    /// Opens the storage areas, starts the engine and binds the server. The first log line says
    /// where the service listens and where it keeps files.
    static func start(_ configuration: ServiceConfiguration, logger: Logger) throws -> RunningService {
        let openFiles = OpenFileLimit.raiseToHardLimit()
        let engine = try DownloadEngine(configuration: configuration.engineConfiguration)
        engine.onPurge { event in
            logger.info("purged", ["kind": event.kind.rawValue, "reason": event.reason.rawValue, "id": event.id,
                                   "url": event.url, "bytes": event.bytes])
        }
        let metrics = ServiceMetrics()
        var api = DownloadAPI(engine: engine, metrics: metrics, auth: configuration.authToken.map(BearerAuth.init(token:)))
        api.subscriberQuota = SubscriberQuota(limit: configuration.maxSubscribersPerDownload)
        api.callerQuota = configuration.maxDownloadsPerClient.map { limit in
            CallerQuota(limit: limit) { [engine] tokens in engine.liveTokens(among: tokens) }
        }
        let handlerAPI = api
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        serverConfiguration.maxConnections = configuration.maxConnections
        serverConfiguration.maxConnectionsPerIP = configuration.maxConnectionsPerIP
        serverConfiguration.accessLog = { entry in
            metrics.record(status: entry.status, bytes: entry.bytes,
                           isFile: entry.path.hasSuffix("/file") && (200..<300).contains(entry.status))
            logger.request(entry)
        }
        let server = HTTPServer(configuration: serverConfiguration) { request in await handlerAPI.respond(to: request) }
        let port = try server.start()
        logger.info("listening", [
            "host": configuration.host, "port": port, "url": "http://\(configuration.host):\(port)",
            "cacheDir": configuration.cacheDirectory, "dataDir": configuration.dataDirectory,
            "stateDir": configuration.stateDirectory, "authRequired": configuration.authToken != nil,
            "allowPrivateNetworks": configuration.allowPrivateNetworks,
            "allowHosts": configuration.allowHosts, "denyHosts": configuration.denyHosts,
            "maxConnections": configuration.maxConnections, "openFileLimit": openFiles.map { Int($0.soft) } ?? -1,
        ])
        if let openFiles, openFiles.soft < UInt64(configuration.maxConnections) + 256 {
            // Accepting pauses briefly on EMFILE instead of answering 503: worth knowing at start.
            logger.warning("open-file limit below --max-connections", [
                "openFileLimit": Int(openFiles.soft), "maxConnections": configuration.maxConnections,
            ])
        }
        return RunningService(engine: engine, server: server, logger: logger,
                              memoryTrimmer: MemoryTrimmer(interval: configuration.memoryTrimInterval))
    }

    /// On the first of `signals`: stop accepting, finish in-flight requests, pause transfers
    /// (journaled, so they carry on at the next start), then exit 0.
    func stopOnSignals(_ signals: [Int32]) {
        signalSources.install(signals) { [self] signal in
            logger.info("shutting down", ["signal": Int(signal)])
            Task {
                async let serverStopped: Void = server.shutdown()
                async let engineStopped: Void = engine.shutdown()
                _ = await (serverStopped, engineStopped)
                logger.info("stopped")
                exit(0)
            }
        }
    }
}

/// Owns the dispatch sources that turn signals into a callback (once).
private final class SignalSources: @unchecked Sendable {
    // Only touched from `install`, which runs once on the main thread before dispatchMain().
    private var sources: [DispatchSourceSignal] = []

    func install(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let fired = Atomic(false)
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if !fired.exchange(true, ordering: .relaxed) { handler(number) }
            }
            source.resume()
            sources.append(source)
        }
    }
}

import Synchronization
