import CSQLite

/// A prepared statement: bind (1-based), step, read columns (0-based), reset for the next use.
/// Prepared once and reused for every row; owned by its connection's thread.
final class SQLiteStatement {
    private let handle: OpaquePointer
    private let connection: SQLiteConnection

    init(_ handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    /// Text of its exact UTF-8 length (a NUL inside is kept; "" stays "", never NULL).
    func bind(_ index: Int32, _ value: String?) {
        guard var value else { sqlite3_bind_null(handle, index); return }
        if value.isEmpty {
            sqlite3_bind_text(handle, index, "", 0, csqlite_transient())
            return
        }
        value.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { text in
                _ = sqlite3_bind_text(handle, index, text.baseAddress, Int32(text.count), csqlite_transient())
            }
        }
    }

    func bind(_ index: Int32, _ value: Int64?) {
        guard let value else { sqlite3_bind_null(handle, index); return }
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ value: Double?) {
        guard let value else { sqlite3_bind_null(handle, index); return }
        sqlite3_bind_double(handle, index, value)
    }

    func bind(_ index: Int32, bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            _ = sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), csqlite_transient())
        }
    }

    /// Advances: true when a row is ready, false when done.
    func step() throws(StateStoreError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = connection.failure(code, String(cString: sqlite3_sql(handle)).prefix(60).description)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs a statement that returns no rows, then resets it.
    func run() throws(StateStoreError) {
        defer { reset() }
        _ = try step()
    }

    /// Steps through every row, handing the statement standing on each to `body`, then resets
    /// (also when a step or `body` throws).
    func forEachRow(_ body: (SQLiteStatement) throws(StateStoreError) -> Void) throws(StateStoreError) {
        defer { reset() }
        while try step() { try body(self) }
    }

    /// The first column of the first row as an integer (nil: no row, or NULL), then resets: a
    /// `count(*)` or a single value.
    func firstInt64() throws(StateStoreError) -> Int64? {
        defer { reset() }
        return try step() ? int64(0) : nil
    }

    /// Ready for the next use: bindings cleared.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    func int64(_ column: Int32) -> Int64? {
        isNull(column) ? nil : sqlite3_column_int64(handle, column)
    }

    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    func bytes(_ column: Int32) -> UnsafeRawBufferPointer {
        let count = Int(sqlite3_column_bytes(handle, column))
        return UnsafeRawBufferPointer(start: sqlite3_column_blob(handle, column), count: count)
    }
}
