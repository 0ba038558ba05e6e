import DownloaderEngine
import Foundation

/// Parses `--flag value` / `--flag=value` arguments and `DOWNLOAD_SERVICE_*` variables into a
/// `ServiceConfiguration`. Pure: arguments and environment in, configuration or error out.
enum CommandLineOptions {
    enum Outcome: Equatable {
        case run(ServiceConfiguration)
        case help
        case version
        case invalid(String)
    }

    struct Option: Sendable {
        var flag: String
        var metavar: String?
        var help: String
        var apply: @Sendable (inout ServiceConfiguration, String) throws(ParseError) -> Void

        var environmentName: String {
            "DOWNLOAD_SERVICE_" + flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
        }
    }

    struct ParseError: Error, Sendable { var message: String }

    /// Every option, in `--help` order.
    static let options: [Option] = generalOptions + originOptions + webhookOptions + eventOptions + coalescingOptions
        + segmentOptions + operatorOptions + clusterOptions + priorityOptions

    static let generalOptions: [Option] = [
        Option(flag: "--host", metavar: "ADDR", help: "address to listen on; :: for IPv6 and IPv4 (default 127.0.0.1)") { c, v throws(ParseError) in
            guard ServiceConfiguration.isNumericAddress(v) else {
                throw ParseError(message: "--host needs a numeric IPv4 or IPv6 address (e.g. 127.0.0.1, 0.0.0.0, ::), got '\(v)'")
            }
            c.host = v
        },
        Option(flag: "--port", metavar: "PORT", help: "port to listen on, 0 for any free port (default 8080)") { c, v throws(ParseError) in
            guard let p = Int(v), (0...65535).contains(p) else { throw ParseError(message: "--port must be 0-65535, got '\(v)'") }
            c.port = p
        },
        Option(flag: "--cache-dir", metavar: "DIR", help: "purgeable completed files (default $XDG_CACHE_HOME/download-service)") { c, v throws(ParseError) in
            c.cacheDirectory = try absolutePath(v, "--cache-dir")
        },
        Option(flag: "--data-dir", metavar: "DIR", help: "persistent completed files (default $XDG_DATA_HOME/download-service)") { c, v throws(ParseError) in
            c.dataDirectory = try absolutePath(v, "--data-dir")
        },
        Option(flag: "--state-dir", metavar: "DIR", help: "partial files and the state database, state.db (default $XDG_STATE_HOME/download-service)") { c, v throws(ParseError) in
            c.stateDirectory = try absolutePath(v, "--state-dir")
        },
        Option(flag: "--max-concurrent", metavar: "N", help: "transfers at once; more wait, a freed slot going to the client holding the fewest, round robin (default 4)") { c, v throws(ParseError) in
            guard let n = Int(v), (1...1024).contains(n) else { throw ParseError(message: "--max-concurrent must be 1-1024, got '\(v)'") }
            c.maxConcurrent = n
        },
        Option(flag: "--max-file-size", metavar: "BYTES", help: "largest file accepted, e.g. 10G; 0 = no limit (default)") { c, v throws(ParseError) in
            c.maxFileSize = try byteCount(v, "--max-file-size")
        },
        Option(flag: "--cache-max-bytes", metavar: "BYTES", help: "cache area budget, e.g. 50G; 0 = no limit (default)") { c, v throws(ParseError) in
            c.cacheMaxBytes = try byteCount(v, "--cache-max-bytes")
        },
        Option(flag: "--auth-token", metavar: "TOKEN", help: "require 'Authorization: Bearer TOKEN' on all but /healthz, /readyz and the page /") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--auth-token must not be empty") }
            c.authToken = v
        },
        Option(flag: "--auth-token-file", metavar: "PATH", help: "read --auth-token from this file (a mounted secret; surrounding blanks dropped; wins over the flag and variable)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--auth-token-file needs a path") }
            c.authTokenFile = v
        },
        Option(flag: "--allow-private-networks", metavar: nil, help: "allow origins on loopback/private addresses (default off)") { c, v throws(ParseError) in
            guard let b = bool(v) else { throw ParseError(message: "--allow-private-networks takes true or false, got '\(v)'") }
            c.allowPrivateNetworks = b
        },
        Option(flag: "--allow-host", metavar: "RULE", help: "allow-list mode: fetch only from this host, *.domain, address or CIDR (repeatable; env: comma-separated)") { c, v throws(ParseError) in
            c.allowHosts += try hostRules(v, "--allow-host")
        },
        Option(flag: "--deny-host", metavar: "RULE", help: "never fetch from this host, *.domain, address or CIDR; wins over allows (repeatable)") { c, v throws(ParseError) in
            c.denyHosts += try hostRules(v, "--deny-host")
        },
        Option(flag: "--allow-url-credentials", metavar: nil, help: "accept user:password@ in URLs (default off: 400 url_credentials)") { c, v throws(ParseError) in
            guard let b = bool(v) else { throw ParseError(message: "--allow-url-credentials takes true or false, got '\(v)'") }
            c.allowURLCredentials = b
        },
        Option(flag: "--max-connections", metavar: "N", help: "open client connections at most; more get 503 (default 16384)") { c, v throws(ParseError) in
            guard let n = Int(v), n >= 1 else { throw ParseError(message: "--max-connections must be a positive number, got '\(v)'") }
            c.maxConnections = n
        },
        Option(flag: "--max-connections-per-ip", metavar: "N", help: "open connections per client IP (public IPv6: per /64); 0 = no limit (default)") { c, v throws(ParseError) in
            guard let n = Int(v), n >= 0 else { throw ParseError(message: "--max-connections-per-ip must be 0 or more, got '\(v)'") }
            c.maxConnectionsPerIP = n == 0 ? nil : n
        },
        Option(flag: "--max-subscribers-per-download", metavar: "N", help: "progress streams per download; more get 503 (default 16384)") { c, v throws(ParseError) in
            guard let n = Int(v), n >= 1 else { throw ParseError(message: "--max-subscribers-per-download must be a positive number, got '\(v)'") }
            c.maxSubscribersPerDownload = n
        },
        Option(flag: "--max-downloads-per-client", metavar: "N", help: "live caller tokens of unfinished downloads per client IP (public IPv6: per /64); more get 429; also the partials a client left (cancelled or failed) kept for it, its oldest purged beyond; 0 = no limit (default 1000)") { c, v throws(ParseError) in
            guard let n = Int(v), n >= 0 else { throw ParseError(message: "--max-downloads-per-client must be 0 or more, got '\(v)'") }
            c.maxDownloadsPerClient = n == 0 ? nil : n
        },
        Option(flag: "--stall-timeout", metavar: "SECONDS", help: "reconnect and resume after this long without a byte (default 30)") { c, v throws(ParseError) in
            c.stallTimeout = try seconds(v, "--stall-timeout", within: 0.05...3600)
        },
        Option(flag: "--min-speed", metavar: "BYTES", help: "reconnect and resume when fewer bytes per second arrive over a --stall-timeout (a download's connections share it), e.g. 16K; 0 = off (default)") { c, v throws(ParseError) in
            c.minSpeed = try byteCount(v, "--min-speed") ?? 0
        },
        Option(flag: "--retry-base-delay", metavar: "SECONDS", help: "first retry delay, doubling per attempt with jitter, at most 30 (default 0.5)") { c, v throws(ParseError) in
            c.retryBaseDelay = try seconds(v, "--retry-base-delay", within: 0...30)  // Retries wait 30 s at most.
        },
        Option(flag: "--max-attempts", metavar: "N", help: "attempts in a row before a download fails; one that kept 1 MiB more starts again (default 6)") { c, v throws(ParseError) in
            guard let n = Int(v), (1...100).contains(n) else { throw ParseError(message: "--max-attempts must be 1-100, got '\(v)'") }
            c.maxAttempts = n
        },
        Option(flag: "--shutdown-delay", metavar: "SECONDS", help: "after SIGTERM, keep serving this long with /readyz answering 503 before stopping (a load balancer's or Kubernetes' time to stop sending; default 0)") { c, v throws(ParseError) in
            c.shutdownDelay = try seconds(v, "--shutdown-delay", within: 0...600)
        },
        Option(flag: "--memory-trim-interval", metavar: "SECONDS", help: "return freed heap memory to the OS this often; 0 = off (default 5)") { c, v throws(ParseError) in
            c.memoryTrimInterval = try seconds(v, "--memory-trim-interval", within: 0...3600)
        },
        // Durability and pressure.
        Option(flag: "--checkpoint-interval", metavar: "SEC", help: "fsync partials and record their offset at least this often (default 1)") { c, v throws(ParseError) in
            c.checkpointInterval = try seconds(v, "--checkpoint-interval", within: 0.01...3600)
        },
        Option(flag: "--checkpoint-bytes", metavar: "BYTES", help: "also checkpoint after this many unsynced bytes, e.g. 4M (default 4M)") { c, v throws(ParseError) in
            guard let n = try byteCount(v, "--checkpoint-bytes") else { throw ParseError(message: "--checkpoint-bytes must be positive") }
            c.checkpointBytes = n
        },
        Option(flag: "--min-free-disk-bytes", metavar: "BYTES", help: "purge paused partials, then LRU cache files, below this free space (default 1G)") { c, v throws(ParseError) in
            c.minFreeDiskBytes = try byteCount(v, "--min-free-disk-bytes") ?? 0
        },
        Option(flag: "--disk-full-wait", metavar: "SECONDS", help: "a download that runs out of disk space keeps its bytes and waits this long for space before it fails disk_full; 0 = fail at once (default 600)") { c, v throws(ParseError) in
            c.diskFullWait = try seconds(v, "--disk-full-wait", within: 0...86_400)
        },
        Option(flag: "--paused-ttl", metavar: "SECONDS", help: "paused downloads older than this are purged and forgotten (default 86400)") { c, v throws(ParseError) in
            c.pausedTTL = try seconds(v, "--paused-ttl", within: 1...31_536_000)
        },
    ]

    /// Comma-separated host rules, each checked by the engine's parser.
    private static func hostRules(_ v: String, _ flag: String) throws(ParseError) -> [String] {
        let entries = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !entries.isEmpty else { throw ParseError(message: "\(flag) needs a host, *.domain, address or CIDR") }
        if let error = EngineConfiguration.validateHostRules(entries) { throw ParseError(message: "\(flag): \(error.message)") }
        return entries
    }

    static func parse(arguments: [String], environment: [String: String]) -> Outcome {
        var config = ServiceConfiguration(environment: environment)
        var given: Set<String> = []  // The flags on the command line.
        do throws(ParseError) {
            // A bad variable is reported (by its name) only when no flag replaces it, and after
            // `--help`/`--version` had their say.
            var badVariables: [(flag: String, message: String)] = []
            for option in options {
                guard let value = environment[option.environmentName] else { continue }
                do throws(ParseError) {
                    try option.apply(&config, value)
                } catch {
                    badVariables.append((option.flag, "\(option.environmentName): \(error.message)"))
                }
            }
            var index = 0
            while index < arguments.count {
                let argument = arguments[index]
                index += 1
                if argument == "--help" || argument == "-h" { return .help }
                if argument == "--version" { return .version }
                let (flag, inline) = splitFlag(argument)
                guard let option = options.first(where: { $0.flag == flag }) else {
                    // The flag alone: a misspelt `--webhook-secre=VALUE` must not print its value.
                    throw ParseError(message: "unknown option '\(flag)' (see --help)")
                }
                given.insert(flag)
                if let inline {
                    try option.apply(&config, inline)
                } else if option.metavar == nil {
                    try option.apply(&config, "true")
                } else {
                    guard index < arguments.count else { throw ParseError(message: "\(flag) needs a value") }
                    try option.apply(&config, arguments[index])
                    index += 1
                }
            }
            if let bad = badVariables.first(where: { !given.contains($0.flag) }) { throw ParseError(message: bad.message) }
            if let path = config.authTokenFile { config.authToken = try secretText(path, "--auth-token-file") }
            if let path = config.adminTokenFile { config.adminToken = try secretText(path, "--admin-token-file") }
        } catch {
            return .invalid(error.message)
        }
        if let problem = config.cluster.problem(host: config.host, givenFlags: given) { return .invalid(problem) }
        let known = Set(options.map(\.environmentName) + ["DOWNLOAD_SERVICE_TEST_CRASH_POINT"])
        config.unknownVariables = environment.keys.filter { $0.hasPrefix("DOWNLOAD_SERVICE_") && !known.contains($0) }.sorted()
        return .run(config)
    }

    /// A secret read from the file at `path` (a mounted Docker or Kubernetes secret): its bytes
    /// without one trailing newline; never empty. Its value is never part of an error.
    static func secretBytes(_ path: String, _ flag: String) throws(ParseError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw ParseError(message: "\(flag): cannot read \(path)") }
        var bytes = [UInt8](data)
        if bytes.last == 10 { bytes.removeLast() }
        if bytes.last == 13 { bytes.removeLast() }
        guard !bytes.isEmpty else { throw ParseError(message: "\(flag): \(path) is empty") }
        return bytes
    }

    /// A token from the file at `path`: its text without a UTF-8 byte-order mark and without the
    /// blanks around it (a request's `Authorization` value loses those too, so a token keeping them
    /// could never match); never empty.
    private static func secretText(_ path: String, _ flag: String) throws(ParseError) -> String {
        var bytes = try secretBytes(path, flag)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw ParseError(message: "\(flag): \(path) holds no token") }
        return text
    }

    static var usage: String {
        var lines = ["usage: download-service [options]", "",
                     "A download proxy: POST /downloads a URL, follow progress as SSE, fetch the file.", "",
                     "options (each also read from the environment variable shown):"]
        for o in options {
            let left = o.flag + (o.metavar.map { " " + $0 } ?? "")
            if left.count >= 28 {
                lines.append("  " + left)
                lines.append("  " + String(repeating: " ", count: 28) + o.help)
            } else {
                lines.append("  " + left.padding(toLength: 28, withPad: " ", startingAt: 0) + o.help)
            }
            lines.append("  " + String(repeating: " ", count: 28) + "env " + o.environmentName)
        }
        lines.append("  --version                   print the versions of the service, libcurl, the TLS library, SQLite and libpq")
        lines.append("  --help                      show this help")
        return lines.joined(separator: "\n")
    }

    private static func splitFlag(_ argument: String) -> (String, String?) {
        guard let eq = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
    }

    static func absolutePath(_ v: String, _ flag: String) throws(ParseError) -> String {
        guard v.hasPrefix("/") else { throw ParseError(message: "\(flag) must be an absolute path, got '\(v)'") }
        return v
    }

    private static func bool(_ v: String) -> Bool? {
        switch v.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: return nil
        }
    }

    /// Bytes with an optional binary suffix (K, M, G, T; `KiB` etc. too). 0 means no limit (nil).
    static func byteCount(_ v: String, _ flag: String) throws(ParseError) -> Int64? {
        var text = v.trimmingCharacters(in: .whitespaces).uppercased()
        // `B` after a number or a unit letter; `iB` only after a unit letter (`5iB` is no count).
        let binary = text.hasSuffix("IB")
        if text.hasSuffix("B") && text.count > 1 { text.removeLast(binary ? 2 : 1) }
        var multiplier: Int64 = 1
        if binary && !["K", "M", "G", "T"].contains(text.last.map(String.init) ?? "") { text = "" }
        if let last = text.last, let power = ["K": 1, "M": 2, "G": 3, "T": 4][String(last)] {
            multiplier = Int64(1) << (10 * power)
            text.removeLast()
        }
        guard let n = Int64(text), n >= 0, n <= Int64.max / multiplier else {
            throw ParseError(message: "\(flag) must be a byte count like 1048576 or 10G, got '\(v)'")
        }
        return n == 0 ? nil : n * multiplier
    }

    /// A number of seconds in `range` (decimals allowed).
    static func seconds(_ v: String, _ flag: String, within range: ClosedRange<Double>) throws(ParseError) -> Double {
        guard let d = Double(v.trimmingCharacters(in: .whitespaces)), d.isFinite, range.contains(d) else {
            throw ParseError(message: "\(flag) must be seconds in \(range.lowerBound)-\(range.upperBound), got '\(v)'")
        }
        return d
    }
}
