// The options of cluster mode (several replicas on one PostgreSQL database and a shared directory).
extension CommandLineOptions {
    static let clusterOptions: [Option] = [
        Option(flag: "--cluster-db", metavar: "URL", help: "cluster mode: postgres://user:password@host:port/db (needs --shared-dir)") { c, v throws(ParseError) in
            guard !v.isEmpty else { throw ParseError(message: "--cluster-db needs a postgres:// URL") }
            c.cluster.database = v
        },
        Option(flag: "--shared-dir", metavar: "DIR", help: "cluster mode: the directory all replicas share (cache/, persistent/, partial/)") { c, v throws(ParseError) in
            c.cluster.sharedDirectory = try absolutePath(v, "--shared-dir")
        },
        Option(flag: "--advertise-url", metavar: "URL", help: "cluster mode: the URL other replicas reach this one at (default http://HOST:PORT)") { c, v throws(ParseError) in
            guard v.hasPrefix("http://") || v.hasPrefix("https://"), v.count > 8 else {
                throw ParseError(message: "--advertise-url must be an http:// or https:// URL, got '\(v)'")
            }
            c.cluster.advertiseURL = v
        },
        Option(flag: "--lease-ttl", metavar: "SECONDS", help: "cluster mode: a transfer's lease lasts this long unrenewed (default 10)") { c, v throws(ParseError) in
            c.cluster.leaseTTL = try seconds(v, "--lease-ttl", within: 1...3600)
        },
        Option(flag: "--cluster-db-pool", metavar: "N", help: "cluster mode: database connections per replica at most (default 8)") { c, v throws(ParseError) in
            guard let n = Int(v), (2...256).contains(n) else { throw ParseError(message: "--cluster-db-pool must be 2-256, got '\(v)'") }
            c.cluster.poolSize = n
        },
    ]
}
