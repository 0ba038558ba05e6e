import Basics
import CPQ
import Foundation

/// Cluster mode's database as the service sees it: reached once at start-up (`connect`, which tries
/// for at most `within` seconds and migrates the schema), then a pool of at most `poolSize`
/// connections that the state store, the leases and the health checks share. Only `address`
/// (`host:port/database`) is ever shown: the connection string's password never is.
public final class ClusterDatabase: Sendable {
    /// `host:port/database`, for logs and errors.
    public let address: String
    let pool: PostgresPool
    let store: PostgresStateStore

    private init(address: String, pool: PostgresPool, store: PostgresStateStore) {
        self.address = address
        self.pool = pool
        self.store = store
    }

    /// Whether the last use of the database reached it (`/healthz`, `/readyz`, 503 while it is lost).
    public var isReachable: Bool { pool.reachable }

    /// Checks the database now (one `SELECT 1` through the pool) and says whether it answered.
    @discardableResult
    public func probe() -> Bool {
        (try? pool.withConnection(wait: 1) { db throws(StateStoreError) in try db.execute("SELECT 1") }) != nil
    }

    /// Seconds each statement may take before its connection is given up (`PostgresConnection`), for
    /// leases of `leaseTTL` seconds: half of it, within 2–5 s. A renewal stuck on a silent database
    /// then fails while its lease's local deadline can still stop the transfer in time (the default
    /// TTL of 10 s renews every 3.3 s), and a replica's API waits no longer than that for an answer.
    public static func statementTimeout(leaseTTL: Double) -> Double {
        min(5, max(2, leaseTTL / 2))
    }

    /// Connects (trying again every half second for at most `within` seconds), migrates the schema,
    /// and opens the pool, whose statements have `statementTimeout` seconds each. The error says
    /// `cluster database <host:port/db> unreachable: <libpq message>`. `clock` measures the time
    /// spent (monotonic by default: a step of the wall clock changes no wait).
    public static func connect(url: String, poolSize: Int, within: Double = 10, statementTimeout: Double = 5,
                               clock: @Sendable () -> Date = { Date(timeIntervalSinceReferenceDate: MonotonicCondition.now()) })
        throws(ClusterDatabaseError) -> ClusterDatabase {
        let parsed = ConnectionAddress(url)
        guard parsed.parses else {
            // libpq's own message quotes the string, password and all: not shown.
            throw ClusterDatabaseError(description: "cluster database: the connection string cannot be parsed"
                                       + " (a postgres://user:password@host:port/database URI or libpq key=value pairs)")
        }
        let address = parsed.display
        let deadline = clock().addingTimeInterval(within)
        var last = "no attempt"
        while true {
            let remaining = deadline.timeIntervalSince(clock())
            let pool = PostgresPool(url: url, capacity: poolSize, connectTimeout: max(1, min(3, remaining)),
                                    statementTimeout: statementTimeout)
            do throws(StateStoreError) {
                let store = try PostgresStateStore(pool: pool)
                return ClusterDatabase(address: address, pool: pool, store: store)
            } catch where error.kind == .newerSchema {
                throw ClusterDatabaseError(description: "cluster database \(address): \(parsed.redact(error.message))")
            } catch {
                last = parsed.redact(error.message.hasPrefix("postgres: ") ? String(error.message.dropFirst(10)) : error.message)
            }
            guard deadline.timeIntervalSince(clock()) > 0.5 else { break }
            usleep(500_000)  // Start-up retry pause (bounded by `within`).
        }
        throw ClusterDatabaseError(description: "cluster database \(address) unreachable: \(last)")
    }
}

/// Why cluster mode could not start.
public struct ClusterDatabaseError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// The parts of a connection string that may be shown, parsed by libpq itself (`PQconninfoParse`,
/// so URIs and `key=value` strings read the same), and the password, only to take it out of messages.
struct ConnectionAddress {
    var host = "localhost"
    var port = "5432"
    var database: String?
    var user: String?
    var password: String?
    /// The password as written in a URI (percent-encoded), to take it out of messages too.
    var writtenPassword: String?
    /// Whether libpq could read the string at all.
    var parses = false

    init(_ url: String) {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &error) else {
            if let error { PQfreemem(error) }
            return
        }
        parses = true
        defer { PQconninfoFree(options) }
        if let (start, at) = URLCredentials.userinfo(in: url), let colon = url[start..<at].firstIndex(of: ":") {
            writtenPassword = String(url[url.index(after: colon)..<at])
        }
        var at = options
        while let keyword = at.pointee.keyword {
            let value = at.pointee.val.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            switch String(cString: keyword) {
            case "host": if let value { host = value }
            case "hostaddr": if let value, host == "localhost" { host = value }
            case "port": if let value { port = value }
            case "dbname": database = value
            case "user": user = value
            case "password": password = value
            default: break
            }
            at += 1
        }
    }

    /// `host:port/database` (the database defaults to the user's name, as in libpq).
    var display: String { "\(host):\(port)/\(database ?? user ?? "?")" }

    /// `text` with the password (if any, as read and as written) replaced by `***`.
    func redact(_ text: String) -> String {
        [password, writtenPassword].compactMap { $0 }.filter { !$0.isEmpty }.reduce(text) {
            $0.replacingOccurrences(of: $1, with: "***")
        }
    }
}

extension ClusterDatabase {
    /// Probes the database every `interval` seconds on a thread of its own, so that reachability is
    /// known even when nothing else uses the database (an outage with no traffic). Runs for the life
    /// of the process.
    public func startProbing(every interval: Double) {
        let thread = Thread { [self] in
            while true {
                probe()
                usleep(useconds_t(max(0.05, interval) * 1_000_000))  // The probe's period (a dedicated thread).
            }
        }
        thread.name = "cluster-database-probe"
        thread.start()
    }
}
