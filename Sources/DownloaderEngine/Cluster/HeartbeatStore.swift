/// Writes the holder's heartbeats (`Heartbeat`) into the downloads' rows, every one fenced by its
/// lease: a row changes only while it is the row of the heartbeat's lease key (`lease_key`) and
/// `leases` has that key with the heartbeat's epoch, active. A
/// holder whose lease was taken over (a higher epoch) or released changes nothing.
struct HeartbeatStore: Sendable {
    let pool: PostgresPool

    /// Heartbeats written in one statement at most (a holder runs at most `--max-concurrent` transfers).
    static let batchLimit = 1_000

    static let updateSQL = """
        UPDATE downloads AS d SET hb_epoch = b.epoch::bigint, hb_bytes_written = b.bytes::bigint,
            hb_callers = b.callers::integer, hb_bytes_per_second = b.rate::float8, hb_eta_seconds = NULLIF(b.eta, '')::float8,
            hb_connections_granted = b.granted::integer, hb_connections_active = b.active::integer,
            hb_reason = NULLIF(b.reason, ''), hb_at = now()
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                    $10::text[])
            AS b(id, key, epoch, bytes, callers, rate, eta, granted, active, reason)
        WHERE d.id = b.id AND d.lease_key = b.key AND EXISTS (SELECT 1 FROM leases AS l WHERE l.key = b.key AND l.epoch = b.epoch::bigint AND l.active)
        RETURNING d.id
        """

    /// Writes `beats` (in statements of at most `batchLimit`) and returns the ids whose rows took
    /// theirs; the others were fenced (their epoch no longer holds an active lease) or have no row.
    func write(_ beats: [Heartbeat]) throws(StateStoreError) -> Set<String> {
        var written: Set<String> = []
        var start = 0
        while start < beats.count {
            let batch = beats[start..<min(beats.count, start + Self.batchLimit)]
            start += batch.count
            let rows = try pool.withConnection { db throws(StateStoreError) in
                try db.execute(Self.updateSQL, Self.parameters(batch))
            }
            for row in rows.rows { if let id = row[0] { written.insert(id) } }
        }
        return written
    }

    /// The ten text arrays of `updateSQL` (a missing ETA or reason as the empty string).
    static func parameters(_ beats: ArraySlice<Heartbeat>) -> [String?] {
        func number(_ value: Double) -> String { value.isFinite ? String(value) : "0" }
        let columns: [[String]] = [
            beats.map(\.id), beats.map(\.leaseKey), beats.map { String($0.epoch) }, beats.map { String($0.bytesWritten) },
            beats.map { String($0.callers) }, beats.map { number($0.bytesPerSecond) },
            beats.map { $0.etaSeconds.flatMap { $0.isFinite ? String($0) : nil } ?? "" },
            beats.map { String($0.connectionsGranted) }, beats.map { String($0.connectionsActive) }, beats.map { $0.reason ?? "" },
        ]
        return columns.map { PostgresArray.literal($0) }
    }
}
