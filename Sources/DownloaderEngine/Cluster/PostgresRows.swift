import CPQ

/// A statement's result, copied out of libpq as text (`NULL` as nil): the rows a query returned, or
/// the count of rows a command touched.
struct PostgresRows: Sendable {
    let rows: [[String?]]
    /// `PQcmdTuples`: rows an INSERT/UPDATE/DELETE touched (0 for other commands).
    let affected: Int

    init(_ result: OpaquePointer) {
        let count = Int(PQntuples(result))
        let columns = Int(PQnfields(result))
        var rows: [[String?]] = []
        rows.reserveCapacity(count)
        for row in 0..<count {
            rows.append((0..<columns).map { column in
                PQgetisnull(result, Int32(row), Int32(column)) == 1
                    ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
            })
        }
        self.rows = rows
        affected = Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// The first column of the first row.
    var scalar: String? { rows.first?.first ?? nil }
}
