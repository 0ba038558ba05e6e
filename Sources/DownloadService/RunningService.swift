import DownloaderEngine
import Foundation
import MiniHTTPServer

/// The engine and the HTTP server, started together and stopped together.
final class RunningService: Sendable {
    let engine: DownloadEngine
    let server: HTTPServer
    let logger: Logger
    private let signalSources = SignalSources()

    private init(engine: DownloadEngine, server: HTTPServer, logger: Logger) {
        self.engine = engine
        self.server = server
        self.logger = logger
    }

    /// Opens the storage areas, starts the engine and binds the server. The first log line says
    /// where the service listens and where it keeps files.
    static func start(_ configuration: ServiceConfiguration, logger: Logger) throws -> RunningService {
        let engine = try DownloadEngine(configuration: configuration.engineConfiguration)
        engine.onPurge { event in
            logger.info("purged", ["kind": event.kind.rawValue, "reason": event.reason.rawValue, "id": event.id,
                                   "url": event.url, "bytes": event.bytes])
        }
        let metrics = ServiceMetrics()
        let api = DownloadAPI(engine: engine, metrics: metrics, auth: configuration.authToken.map(BearerAuth.init(token:)))
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        serverConfiguration.accessLog = { entry in
            metrics.record(status: entry.status, bytes: entry.bytes,
                           isFile: entry.path.hasSuffix("/file") && (200..<300).contains(entry.status))
            logger.info("request", [
                "method": entry.method, "path": entry.path, "status": entry.status, "bytes": entry.bytes,
                "durationMs": (entry.durationSeconds * 1_000_000).rounded() / 1000, "remote": entry.remoteAddress,
            ])
        }
        let server = HTTPServer(configuration: serverConfiguration) { request in await api.respond(to: request) }
        let port = try server.start()
        logger.info("listening", [
            "host": configuration.host, "port": port, "url": "http://\(configuration.host):\(port)",
            "cacheDir": configuration.cacheDirectory, "dataDir": configuration.dataDirectory,
            "stateDir": configuration.stateDirectory, "authRequired": configuration.authToken != nil,
            "allowPrivateNetworks": configuration.allowPrivateNetworks,
        ])
        return RunningService(engine: engine, server: server, logger: logger)
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
