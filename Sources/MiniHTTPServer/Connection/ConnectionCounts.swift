/// Open connections, in total and per client IP, against the server's limits. Pure: `admit` and
/// `release` only count, so a table test covers every limit.
struct ConnectionCounts: Sendable, Equatable {
    /// Why a new connection is turned away.
    enum Refusal: Sendable, Equatable {
        /// `maxConnections` are open.
        case serverFull
        /// `maxConnectionsPerIP` are open from this client's address.
        case addressFull
    }

    var maxConnections: Int
    var maxConnectionsPerIP: Int?
    private(set) var total = 0
    /// Only addresses with open connections (entries go when their count drops to zero).
    private(set) var perIP: [String: Int] = [:]

    init(maxConnections: Int, maxConnectionsPerIP: Int?) {
        self.maxConnections = max(1, maxConnections)
        self.maxConnectionsPerIP = maxConnectionsPerIP.map { max(1, $0) }
    }

    /// Counts a new connection from `ip`, or says why it must be refused (nothing counted then).
    mutating func admit(_ ip: String) -> Refusal? {
        guard total < maxConnections else { return .serverFull }
        if let limit = maxConnectionsPerIP {
            let open = perIP[ip, default: 0]
            guard open < limit else { return .addressFull }
            perIP[ip] = open + 1
        }
        total += 1
        return nil
    }

    /// Forgets one connection from `ip` admitted earlier.
    mutating func release(_ ip: String) {
        total = max(0, total - 1)
        guard maxConnectionsPerIP != nil, let open = perIP[ip] else { return }
        perIP[ip] = open > 1 ? open - 1 : nil
    }

    /// The address part of `host:port` / `[v6]:port` as the server reports peers.
    static func ip(ofRemote remote: String) -> String {
        if remote.hasPrefix("["), let close = remote.firstIndex(of: "]") {
            return String(remote[remote.index(after: remote.startIndex)..<close])
        }
        guard let colon = remote.lastIndex(of: ":"), remote.firstIndex(of: ":") == colon else { return remote }
        return String(remote[..<colon])
    }
}
