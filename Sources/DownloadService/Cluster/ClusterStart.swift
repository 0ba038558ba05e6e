import DownloaderEngine

/// Cluster mode at start-up: reaches the database (for at most 10 s, then the service exits 1 with
/// `cluster database <host:port/db> unreachable: <libpq message>`), migrates it, and keeps probing
/// it so that `/healthz` and `/readyz` know whether it is reachable. Nothing in single-process mode.
enum ClusterStart {
    /// Seconds the start-up tries to reach the database.
    static let connectWithin: Double = 10

    static func connect(_ configuration: ServiceConfiguration, logger: Logger) throws(ClusterDatabaseError) -> ClusterDatabase? {
        let options = configuration.cluster
        guard let url = options.database else { return nil }
        let database = try ClusterDatabase.connect(url: url, poolSize: options.poolSize, within: connectWithin,
                                                   statementTimeout: ClusterDatabase.statementTimeout(leaseTTL: options.leaseTTL))
        database.startProbing(every: min(1, options.leaseTTL / 3))
        logger.info("cluster database reached", [
            "database": database.address, "sharedDir": options.sharedDirectory ?? "", "leaseTTL": options.leaseTTL,
            "pool": options.poolSize, "advertiseURL": options.advertiseURL ?? "",
        ])
        return database
    }

    /// The replicas' shared secret for vouching for forwarded clients' addresses (created by the first
    /// replica to start); nil in single-process mode, or when the database failed just now (then
    /// forwarded requests count under the forwarding replica's address, as a warning says).
    static func signing(_ database: ClusterDatabase?, logger: Logger) -> ClientSigning? {
        guard let database else { return nil }
        guard let secret = database.sharedSecret(named: ClientSigning.secretName, generate: ClientSigning.freshSecret) else {
            logger.warning("cluster secret unreadable: forwarded requests count under the forwarding replica's address", [:])
            return nil
        }
        return ClientSigning(secret: secret)
    }

    /// `--max-downloads-per-client`: across replicas in cluster mode (counted in the database), else
    /// in this process's memory.
    static func callerLimit(_ limit: Int?, _ database: ClusterDatabase?, engine: DownloadEngine) -> (any CallerLimit)? {
        guard let limit else { return nil }
        if let database { return ClusterCallerQuota(limit: limit, store: database.clientTokens()) }
        return CallerQuota(limit: limit) { [engine] tokens in engine.tokensHoldingPlaces(among: tokens) }
    }

    /// This replica in the cluster: a fresh owner id, `--advertise-url`
    /// (default `http://HOST:PORT`, with the port actually bound) and `--lease-ttl`.
    static func replica(_ configuration: ServiceConfiguration, port: Int) -> ClusterReplica {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let advertised = configuration.cluster.advertiseURL ?? "http://\(host):\(port)"
        return ClusterReplica(advertiseURL: advertised, leaseTTL: configuration.cluster.leaseTTL)
    }
}
