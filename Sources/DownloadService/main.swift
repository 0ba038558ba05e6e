import CLinux
import DownloaderEngine
import Foundation
import MiniHTTPServer

// download-service: configuration from flags and environment, the engine, the HTTP server, and
// signal handling. Everything else lives in the types this file wires together.

let configuration: ServiceConfiguration
switch CommandLineOptions.parse(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment) {
case .help:
    print(CommandLineOptions.usage)
    exit(0)
case .version:
    print(ServiceVersion.report)
    exit(0)
case .invalid(let message):
    FileHandle.standardError.write(Data("download-service: \(message)\n".utf8))
    exit(2)
case .run(let parsed):
    configuration = parsed
}
let logger = Logger(writer: LogWriter(fileDescriptor: 2), minimumLevel: configuration.logLevel,
                    format: configuration.logFormat ?? (isatty(2) == 1 ? .text : .json))

// Before anything starts: a SIGTERM during start-up must still mean a clean shutdown. SIGHUP too
// (a closed terminal, or an operator's habit of "reload": nothing is reloaded, the service stops
// cleanly instead of dying without storing where its transfers stood), unless it came in ignored
// (`nohup`): the operator shielded the service from it.
let hangUp: [Int32] = clinux_signal_ignored(SIGHUP) == 1 ? [] : [SIGHUP]
let drain = ShutdownDrain(delay: configuration.shutdownDelay)
guard let shutdownSignals = ShutdownSignals([SIGTERM, SIGINT] + hangUp,
                                            repeated: { RunningService.signalledAgain(signal: $0, drain: drain, logger: logger) }) else {
    logger.error("could not install the SIGTERM/SIGINT/SIGHUP handlers", [:])
    logger.flush()
    exit(1)
}
let service: RunningService
do {
    service = try RunningService.start(configuration, logger: logger, drain: drain)
} catch let error as ClusterDatabaseError {
    // `cluster database <host:port/db> unreachable: <libpq message>` (never the password).
    logger.error(error.description, [:])
    logger.flush()
    exit(1)
} catch {
    logger.error("could not start", ["error": String(describing: error)])
    logger.flush()
    exit(1)
}
shutdownSignals.whenSignalled { service.shutDownAndExit(signal: $0) }
dispatchMain()
