import CSQLite

/// One SQLite connection (libsqlite3, opened without its own mutex: one thread uses it at a time).
/// Every call that can fail throws a `StateStoreError` naming what was being done.
final class SQLiteConnection: @unchecked Sendable {
    private var handle: OpaquePointer?

    /// Opens (creating it when missing) the database at `path`, never through a symlink.
    init(path: String) throws(StateStoreError) {
        var db: OpaquePointer?
        let code = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nil)
        handle = db
        guard code == SQLITE_OK else {
            let error = Self.error(code, db, "open \(path)")
            sqlite3_close_v2(db)
            handle = nil
            throw error
        }
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    /// Closes the connection (statements still alive are finalized when they go).
    func close() {
        sqlite3_close_v2(handle)
        handle = nil
    }

    /// Runs `sql` (one or more statements, no results).
    func execute(_ sql: String) throws(StateStoreError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard code == SQLITE_OK else {
            let detail = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            throw Self.error(code, detail: detail, "\(sql.prefix(60))")
        }
    }

    func prepare(_ sql: String) throws(StateStoreError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw failure(code, "prepare \(sql.prefix(60))") }
        return SQLiteStatement(statement, connection: self)
    }

    /// The first column of the first row of `sql` as text (PRAGMAs that answer with one value).
    func text(_ sql: String) throws(StateStoreError) -> String? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    /// The error for result `code`, with the connection's message.
    func failure(_ code: Int32, _ context: String) -> StateStoreError {
        Self.error(code, handle, context)
    }

    private static func error(_ code: Int32, _ db: OpaquePointer?, _ context: String) -> StateStoreError {
        let detail = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        return error(code, detail: detail, context)
    }

    static func error(_ code: Int32, detail: String, _ context: String) -> StateStoreError {
        let kind: StateStoreError.Kind
        switch code & 0xff {
        case SQLITE_CORRUPT, SQLITE_NOTADB: kind = .damaged
        case SQLITE_FULL: kind = .full
        default: kind = .other
        }
        return StateStoreError(kind: kind, message: "sqlite: \(detail) (\(String(cString: sqlite3_errstr(code))), code \(code)) in \(context)")
    }
}
