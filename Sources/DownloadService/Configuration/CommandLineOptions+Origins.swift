import DownloaderEngine

// The options about reaching origins (TLS, the upstream proxy, timeouts) and about the log.
extension CommandLineOptions {
    static let originOptions: [Option] = [
        Option(flag: "--ca-file", metavar: "PATH", help: "PEM CA certificates trusted on top of the system's (origins and proxy)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--ca-file needs a path") }
            c.caFile = v
        },
        Option(flag: "--upstream-proxy", metavar: "URL", help: "fetch through this http:// or https:// proxy (user:password@ allowed)") { c, v throws(ParseError) in
            if let error = EngineConfiguration.validateProxy(v, noProxy: []) { throw ParseError(message: "--\(error.message)") }
            c.upstreamProxy = v
        },
        Option(flag: "--no-proxy", metavar: "LIST", help: "hosts fetched directly: names, *.suffix, addresses, CIDRs (comma-separated)") { c, v throws(ParseError) in
            let entries = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            if let error = EngineConfiguration.validateProxy(nil, noProxy: entries) { throw ParseError(message: "--\(error.message)") }
            c.noProxy += entries
        },
        Option(flag: "--connect-timeout", metavar: "SECONDS", help: "to connect: lookup, TCP, TLS, proxy tunnel (default 10)") { c, v throws(ParseError) in
            c.connectTimeout = try seconds(v, "--connect-timeout", within: 0.05...600)
        },
        Option(flag: "--head-timeout", metavar: "SECONDS", help: "from sending a request to the end of its response head (default 30)") { c, v throws(ParseError) in
            c.headTimeout = try seconds(v, "--head-timeout", within: 0.05...3600)
        },
        Option(flag: "--log-level", metavar: "LEVEL", help: "debug, info, warn or error (default info)") { c, v throws(ParseError) in
            guard let level = Logger.Level(option: v) else {
                throw ParseError(message: "--log-level must be debug, info, warn or error, got '\(v)'")
            }
            c.logLevel = level
        },
        Option(flag: "--log-format", metavar: "FORMAT", help: "json or text (default: text when stderr is a terminal, else json)") { c, v throws(ParseError) in
            guard let format = LogFormat(rawValue: v.lowercased()) else {
                throw ParseError(message: "--log-format must be json or text, got '\(v)'")
            }
            c.logFormat = format
        },
    ]

    /// The environment's proxy variables, which are never used (only `--upstream-proxy` is): the
    /// names of those set, for the start-up line (never their values).
    static func ignoredProxyVariables(in environment: [String: String]) -> [String] {
        let names = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"]
        return names.filter { environment[$0] != nil }
    }
}
