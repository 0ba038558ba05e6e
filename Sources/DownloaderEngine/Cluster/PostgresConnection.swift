import CPQ
import Foundation

/// One libpq connection (`PGconn`), used by one thread at a time. Statements go through
/// `PQsendQueryParams` with text parameters and text results (`PostgresRows`), so nothing
/// user-supplied is ever spliced into SQL. A failure throws `StateStoreError` carrying libpq's
/// message (which never holds the password); `isBroken` tells a lost connection from a refused
/// statement.
///
/// Every statement has a client-side deadline (`statementTimeout`): libpq's own calls wait for the
/// server forever, and a server that stops answering without closing (frozen by `SIGSTOP`, a
/// partition, a full disk under its WAL) would hold the calling thread for as long. Past the
/// deadline the connection counts as broken (the pool drops it; the server ends the session when it
/// sees the socket closed) and the statement fails; whether a `COMMIT` so cut off took effect is
/// unknown, as for any connection lost during one.
final class PostgresConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    /// Seconds a statement may take, from sending it to its last result.
    var statementTimeout: Double
    /// Set when a statement passed its deadline or the socket failed: the connection is not used again.
    private var abandoned = false
    /// Connections the whole process has opened and not yet closed (the pool's bound is checked against it in tests).
    nonisolated(unsafe) private static var openCount = 0
    private static let countLock = NSLock()
    static var open: Int { countLock.withLock { openCount } }

    /// Connects to `url` (a `postgres://` URI or a `key=value` string), waiting at most
    /// `timeout` seconds (libpq's `connect_timeout`, whole seconds, at least 1).
    init(url: String, timeout: Double, statementTimeout: Double = 30) throws(StateStoreError) {
        self.statementTimeout = statementTimeout
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
        // Sends never block: `execute` waits for the socket itself, with its deadline.
        guard PQsetnonblocking(made, 1) == 0 else {
            let message = Self.message(made)
            PQfinish(made)
            throw StateStoreError(kind: .other, message: message)
        }
        connection = made
        Self.countLock.withLock { Self.openCount += 1 }
        // A replica frozen inside a transaction (SIGSTOP, a partition) would keep its row locks (a
        // lease row `FOR SHARE` during a fenced commit) and block every other replica's takeover of
        // that lease until it woke: the server ends such a session after 2 s instead (our
        // transactions take milliseconds; a commit so cut short fails and is retried). A statement
        // that is only slow (a lock wait, a large scan) is cancelled by the server itself before
        // the client's deadline: an ordinary error, the connection kept and nothing left running
        // that holds locks; the client's deadline is for a server that no longer answers at all.
        // From PostgreSQL 14 the server also checks, during a long statement, that we are still there.
        _ = try? execute("SET idle_in_transaction_session_timeout = 2000; SET statement_timeout = \(Self.serverTimeout(statementTimeout))")
        _ = try? execute("SET client_connection_check_interval = 1000")
        if isBroken { throw StateStoreError(kind: .other, message: "postgres: the new connection stopped answering") }
    }

    /// Milliseconds the server gives a statement (`statement_timeout`): a little less than
    /// `seconds`, the client's deadline.
    static func serverTimeout(_ seconds: Double) -> Int {
        Int((max(0.5, seconds - max(0.5, seconds / 10)) * 1000).rounded())
    }

    deinit {
        PQfinish(connection)
        Self.countLock.withLock { Self.openCount -= 1 }
    }

    /// Whether the connection to the server is lost or was given up (a new one is needed).
    var isBroken: Bool { abandoned || PQstatus(connection) != CONNECTION_OK }

    /// Whether a connection that sat idle (no statement under way, no `LISTEN`) may be used. A
    /// server that ended the session meanwhile (a restart or failover, `pg_terminate_backend`,
    /// `idle_session_timeout`) sent its last message and closed, so the socket reads at once;
    /// an idle session in order has nothing to say. So anything to read gives it up (libpq,
    /// having read such a goodbye, still reports the connection good until a statement fails).
    /// One poll(2). (A connection cut without a word, by a NAT's idle timeout, is only found by
    /// its next statement's deadline.)
    func stillOpenWhileIdle() -> Bool {
        guard !isBroken else { return false }
        var socket = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        let ready = poll(&socket, 1, 0)
        guard ready != 0 else { return true }
        if ready < 0 && errno == EINTR { return true }
        abandoned = true
        return false
    }

    /// The backend's process id (tests: terminating a session).
    var backendPID: Int32 { PQbackendPID(connection) }

    /// Runs `sql` with `$1…` bound to `parameters` (nil: SQL NULL) and returns its rows (none for a
    /// command). One statement per call when there are parameters; several, `;`-separated, without
    /// (as `PQexec`: the first failure is the answer, else the last statement's rows).
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws(StateStoreError) -> PostgresRows {
        guard !abandoned else { throw StateStoreError(kind: .other, message: "postgres: the connection was given up") }
        let deadline = SystemClock().monotonic() + statementTimeout
        let sent: Int32
        if parameters.isEmpty {
            sent = PQsendQuery(connection, sql)
        } else {
            sent = Self.withOptionalCStrings(parameters) { values in
                PQsendQueryParams(connection, sql, Int32(parameters.count), nil, values, nil, nil, 0)
            }
        }
        guard sent == 1 else { throw StateStoreError(kind: .other, message: Self.message(connection)) }
        try flush(until: deadline)
        var answer: OpaquePointer?
        var failure: OpaquePointer?
        defer {
            if let answer { PQclear(answer) }
            if let failure { PQclear(failure) }
        }
        while true {
            try awaitResult(until: deadline)
            guard let result = PQgetResult(connection) else { break }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                if let answer { PQclear(answer) }
                answer = result
            default:
                if failure == nil { failure = result } else { PQclear(result) }
            }
        }
        if let failure {
            let state = PQresultErrorField(failure, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let text = PQresultErrorMessage(failure).map { String(cString: $0) } ?? ""
            throw StateStoreError(kind: state == "53100" ? .full : .other,
                                  message: "postgres: " + text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard let answer else { throw StateStoreError(kind: .other, message: Self.message(connection)) }
        return PostgresRows(answer)
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

    /// Sends what libpq holds of the statement, waiting for the socket at most until `deadline`.
    private func flush(until deadline: Double) throws(StateStoreError) {
        while true {
            switch PQflush(connection) {
            case 0: return
            case 1:
                // Wait for room to write, or for input (libpq must read it to go on writing).
                let events = try wait(for: Int16(POLLOUT | POLLIN), until: deadline)
                if events & Int16(POLLIN) != 0, PQconsumeInput(connection) == 0 { throw lost() }
            default: throw lost()
            }
        }
    }

    /// Reads until the next result is complete (`PQisBusy` is false), at most until `deadline`.
    private func awaitResult(until deadline: Double) throws(StateStoreError) {
        while PQisBusy(connection) == 1 {
            _ = try wait(for: Int16(POLLIN), until: deadline)
            guard PQconsumeInput(connection) == 1 else { throw lost() }
        }
    }

    /// `poll`s the socket for `events` until `deadline`; past it the connection is abandoned.
    private func wait(for events: Int16, until deadline: Double) throws(StateStoreError) -> Int16 {
        let fd = PQsocket(connection)
        guard fd >= 0 else { throw lost() }
        while true {
            let remaining = deadline - SystemClock().monotonic()
            guard remaining > 0 else {
                abandoned = true
                throw StateStoreError(kind: .other, message: "postgres: no answer within \(Self.seconds(statementTimeout)) s (the connection is given up)")
            }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(min(remaining * 1000, 60_000).rounded(.up)))
            if ready > 0 { return entry.revents }
            if ready < 0 && errno != EINTR { throw lost() }
        }
    }

    /// The connection failed under a statement: given up, with libpq's reason.
    private func lost() -> StateStoreError {
        abandoned = true
        return StateStoreError(kind: .other, message: Self.message(connection))
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
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
