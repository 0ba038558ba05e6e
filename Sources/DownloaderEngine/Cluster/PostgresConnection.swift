import CPQ
import Foundation

/// One libpq connection (`PGconn`), used by one thread at a time. Statements go through
/// `PQexecParams` with text parameters and text results (`PostgresRows`), so nothing user-supplied is
/// ever spliced into SQL. A failure throws `StateStoreError` carrying libpq's message (which never
/// holds the password); `isBroken` tells a lost connection from a refused statement.
final class PostgresConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    /// Connections the whole process has opened and not yet closed (the pool's bound is checked against it in tests).
    nonisolated(unsafe) private static var openCount = 0
    private static let countLock = NSLock()
    static var open: Int { countLock.withLock { openCount } }

    /// Connects to `url` (a `postgres://` URI or a `key=value` string), waiting at most
    /// `timeout` seconds (libpq's `connect_timeout`, whole seconds, at least 1).
    init(url: String, timeout: Double) throws(StateStoreError) {
        let keywords = ["dbname", "connect_timeout", "application_name"]
        let values = [url, String(max(1, Int(timeout.rounded(.up)))), "download-service"]
        let made: OpaquePointer? = keywords.withCStrings { k in values.withCStrings { v in PQconnectdbParams(k, v, 1) } }
        guard let made else { throw StateStoreError(kind: .other, message: "libpq: out of memory") }
        guard PQstatus(made) == CONNECTION_OK else {
            let message = Self.message(made)
            PQfinish(made)
            throw StateStoreError(kind: .other, message: message)
        }
        // The server's notices (e.g. "relation … already exists, skipping") would go to stderr, in the
        // middle of the service's JSON log: they are dropped.
        PQsetNoticeProcessor(made, { _, _ in }, nil)
        connection = made
        Self.countLock.withLock { Self.openCount += 1 }
        // A replica frozen inside a transaction (SIGSTOP, a partition) would keep its row locks (a
        // lease row `FOR SHARE` during a fenced commit) and block every other replica's takeover of
        // that lease until it woke: the server ends such a session after 2 s instead (our
        // transactions take milliseconds; a commit so cut short fails and is retried).
        _ = try? execute("SET idle_in_transaction_session_timeout = 2000")
    }

    deinit {
        PQfinish(connection)
        Self.countLock.withLock { Self.openCount -= 1 }
    }

    /// Whether the connection to the server is lost (a new one is needed).
    var isBroken: Bool { PQstatus(connection) != CONNECTION_OK }

    /// The backend's process id (tests: terminating a session).
    var backendPID: Int32 { PQbackendPID(connection) }

    /// Runs `sql` with `$1…` bound to `parameters` (nil: SQL NULL) and returns its rows (none for a
    /// command). One statement per call when there are parameters; several, `;`-separated, without.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws(StateStoreError) -> PostgresRows {
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = PQexec(connection, sql)
        } else {
            result = Self.withOptionalCStrings(parameters) { values in
                PQexecParams(connection, sql, Int32(parameters.count), nil, values, nil, nil, 0)
            }
        }
        guard let result else { throw StateStoreError(kind: .other, message: Self.message(connection)) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(result)
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let text = PQresultErrorMessage(result).map { String(cString: $0) } ?? ""
            throw StateStoreError(kind: state == "53100" ? .full : .other,
                                  message: "postgres: " + text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// Runs `body` inside `BEGIN … COMMIT`, rolling back when it throws.
    func transaction<T>(_ body: () throws(StateStoreError) -> T) throws(StateStoreError) -> T {
        try execute("BEGIN")
        do throws(StateStoreError) {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if !isBroken { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Notifications received since the last call (after `LISTEN`), without blocking.
    func notifications() -> [(channel: String, payload: String)] {
        _ = PQconsumeInput(connection)
        var found: [(String, String)] = []
        while let note = PQnotifies(connection) {
            found.append((String(cString: note.pointee.relname), String(cString: note.pointee.extra)))
            PQfreemem(note)
        }
        return found
    }

    /// The connection's socket (to wait for notifications with `poll`).
    var socket: Int32 { PQsocket(connection) }

    private static func message(_ connection: OpaquePointer) -> String {
        let text = PQerrorMessage(connection).map { String(cString: $0) } ?? "unknown error"
        return text.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: " ")
    }

    private static func withOptionalCStrings<R>(_ values: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0) } ?? nil }
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
        }
    }
}

extension [String] {
    /// A NULL-terminated array of C strings, valid inside `body`.
    func withCStrings<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = map { strdup($0) } + [nil]
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
        }
    }
}
