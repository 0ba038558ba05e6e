/// Cluster mode's settings (`--cluster-db`, `--shared-dir`, `--advertise-url`, `--lease-ttl`,
/// `--cluster-db-pool`). Without `database` the service is the single process it always was; with
/// it, `sharedDirectory` is required too (and the reverse), and replaces the three storage areas.
struct ClusterOptions: Sendable, Equatable {
    /// `postgres://user:password@host:port/database` (or a libpq `key=value` string). Never logged
    /// whole: `ClusterDatabase` shows only `host:port/database`.
    var database: String?
    /// The directory every replica mounts (an RWX volume): `cache/`, `persistent/`, `partial/`.
    var sharedDirectory: String?
    /// The URL other replicas reach this one at (default `http://<host>:<port>`).
    var advertiseURL: String?
    /// Seconds a transfer lease lasts without renewal (default 10, at least 1).
    var leaseTTL: Double = 10
    /// Connections to the database this replica opens at most (default 8).
    var poolSize = 8

    var isEnabled: Bool { database != nil }

    /// The start-up error of a half-given cluster configuration (exit 2), or nil. `host`: the
    /// address the service listens on (a wildcard is no address other replicas can reach).
    /// `givenFlags`: the flags on the command line; an area flag beside `--shared-dir` would be
    /// ignored, so it is refused (the environment's area variables, as an image sets them, are not).
    func problem(host: String, givenFlags: Set<String> = []) -> String? {
        let areaFlags = ["--cache-dir", "--data-dir", "--state-dir"].filter(givenFlags.contains)
        if sharedDirectory != nil, let flag = areaFlags.first {
            return "--shared-dir replaces \(flag) (its cache/, persistent/ and partial/ are the areas): give one or the other"
        }
        switch (database, sharedDirectory) {
        case (.some, nil): return "--cluster-db needs --shared-dir (the directory every replica shares)"
        case (nil, .some): return "--shared-dir is for cluster mode: it needs --cluster-db"
        case (nil, nil):
            let defaults = ClusterOptions()
            guard advertiseURL == nil, leaseTTL == defaults.leaseTTL, poolSize == defaults.poolSize else {
                return "--advertise-url, --lease-ttl and --cluster-db-pool are for cluster mode: they need --cluster-db"
            }
            return nil
        case (.some, .some):
            guard advertiseURL == nil, ServiceConfiguration.isWildcard(host) else { return nil }
            return "with --host \(host) other replicas cannot reach this one at its listening address: give --advertise-url"
        }
    }

    /// `<shared>/cache`, `<shared>/persistent`, `<shared>/partial`.
    var areas: (cache: String, data: String, state: String)? {
        sharedDirectory.map { shared in
            let root = shared.hasSuffix("/") ? String(shared.dropLast()) : shared
            return (root + "/cache", root + "/persistent", root + "/partial")
        }
    }
}
