// The options about operating the service: the admin token and retention.
extension CommandLineOptions {
    static let operatorOptions: [Option] = [
        Option(flag: "--admin-token", metavar: "TOKEN", help: "require this bearer token on /admin/* (default: --auth-token's, open without)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--admin-token must not be empty") }
            c.adminToken = v
        },
        Option(flag: "--admin-token-file", metavar: "PATH", help: "read --admin-token from this file (surrounding blanks dropped; wins over the flag and variable)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--admin-token-file needs a path") }
            c.adminTokenFile = v
        },
        Option(flag: "--cache-ttl", metavar: "DURATION", help: "remove cache files not asked for this long: 90, 30s, 15m, 12h, 7d (0 = off, default)") { c, v throws(ParseError) in
            c.cacheTTL = try duration(v, "--cache-ttl")
        },
    ]

    /// A duration: a number with an optional unit `s`, `m`, `h` or `d` (plain: seconds). 0 means
    /// off (nil). At most 10 years.
    static func duration(_ v: String, _ flag: String) throws(ParseError) -> Double? {
        var text = v.trimmingCharacters(in: .whitespaces).lowercased()
        var unit: Double = 1
        if let last = text.last, let factor = ["s": 1.0, "m": 60, "h": 3600, "d": 86_400][String(last)] {
            unit = factor
            text.removeLast()
        }
        guard let n = Double(text), n.isFinite, n >= 0, text.first != "+", n * unit <= 10 * 365 * 86_400 else {
            throw ParseError(message: "\(flag) must be a duration like 90, 30s, 15m, 12h or 7d (0 = off), got '\(v)'")
        }
        return n == 0 ? nil : n * unit
    }
}
