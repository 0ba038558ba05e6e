import Foundation

/// Reads of the cluster database for downloads this replica does not hold: a download by id (with
/// its token hashes), the download of a token, the newest downloads, and the rows a relay follows.
/// Each is one statement on a pooled connection; a heartbeat comes with a row only while the epoch
/// that wrote it holds an active lease (`Heartbeat`).
struct ClusterReader: Sendable {
    let pool: PostgresPool

    /// Downloads `list` reads at most (newest first), beside those the replica holds.
    static let listLimit = 10_000
    /// Ids a relay poll asks for in one statement.
    static let pollBatch = 1_000

    /// The row's columns (`PostgresStateStore.columns`), its live token count, then the heartbeat.
    static let select: String = {
        let columns = PostgresStateStore.columns.map { "d." + $0 }.joined(separator: ", ")
        return "SELECT \(columns), (SELECT count(*) FROM tokens AS t WHERE t.download = d.id), l.key IS NOT NULL, d.lease_key, "
            + "d.hb_epoch, d.hb_bytes_written, d.hb_callers, d.hb_bytes_per_second, d.hb_eta_seconds, d.hb_connections_granted, "
            + "d.hb_connections_active, d.hb_reason FROM downloads AS d "
            + "LEFT JOIN leases AS l ON l.key = d.lease_key AND l.epoch = d.hb_epoch AND l.active"
    }()

    /// Download `id` with its token hashes (to adopt it), read consistently; nil when there is no such row.
    func download(id: String) throws(StateStoreError) -> ClusterRow? {
        try pool.withConnection { db throws(StateStoreError) -> ClusterRow? in
            try db.transaction { () throws(StateStoreError) -> ClusterRow? in
                try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                guard let row = try db.execute(Self.select + " WHERE d.id = $1", [id]).rows.first else { return nil }
                var found = try Self.row(row)
                for token in try db.execute("SELECT encode(hash, 'hex') FROM tokens WHERE download = $1", [id]).rows {
                    if let hash = token[0].flatMap(PostgresArray.bytes(hex:)).flatMap({ TokenHash(digest: $0) }) {
                        found.stored.tokens.insert(hash)
                    }
                }
                return found
            }
        }
    }

    /// Download `id` in one statement, with its token count but not its token hashes (what a
    /// snapshot needs); nil when there is no such row.
    func row(id: String) throws(StateStoreError) -> ClusterRow? {
        try rows(ids: [id])[id]
    }

    /// The download whose live caller token hashes to `hash`; nil for none.
    func downloadID(of hash: TokenHash) throws(StateStoreError) -> String? {
        try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT download FROM tokens WHERE hash = decode($1, 'hex') LIMIT 1", [PostgresArray.hex(hash.digest)])
        }.scalar
    }

    /// Which of `hashes` are live caller tokens of some download.
    func liveTokens(among hashes: [TokenHash]) throws(StateStoreError) -> Set<TokenHash> {
        guard !hashes.isEmpty else { return [] }
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT DISTINCT encode(hash, 'hex') FROM tokens "
                           + "WHERE hash = ANY(ARRAY(SELECT decode(h, 'hex') FROM unnest($1::text[]) AS h))",
                           [PostgresArray.literal(hashes.map { PostgresArray.hex($0.digest) })])
        }.rows
        return Set(rows.compactMap { $0[0].flatMap(PostgresArray.bytes(hex:)).flatMap { TokenHash(digest: $0) } })
    }

    /// The newest `limit` downloads (in `state` when given; after `position` in the list when
    /// given; without the private ones unless `includingPrivate`), newest first, in the order of
    /// `ListPosition` (creation time in microseconds, then id), which is what a page follows.
    func newest(state: DownloadState? = nil, after position: ListPosition? = nil, limit: Int = listLimit,
                includingPrivate: Bool = true) throws(StateStoreError) -> [ClusterRow] {
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute(Self.select + " WHERE ($2::text IS NULL OR d.state = $2) AND ($3::bigint IS NULL OR "
                           + "(floor(d.created_at * 1000000)::bigint, d.id COLLATE \"C\") < ($3::bigint, $4::text COLLATE \"C\")) "
                           + "AND ($5::boolean OR d.credential_key IS NULL) "
                           + "ORDER BY floor(d.created_at * 1000000) DESC, d.id COLLATE \"C\" DESC LIMIT $1",
                           [String(limit), state?.rawValue, position.map { String($0.micros) }, position?.id, String(includingPrivate)])
        }.rows
        return try rows.map { row throws(StateStoreError) in try Self.row(row) }
    }

    /// How many downloads are in each state, leaving out `ids` (one statement, however many rows).
    func stateCounts(excluding ids: [String]) throws(StateStoreError) -> [DownloadState: Int] {
        let rows = try pool.withConnection { db throws(StateStoreError) in
            try db.execute("SELECT state, count(*) FROM downloads WHERE NOT (id = ANY($1::text[])) GROUP BY state",
                           [PostgresArray.literal(ids)])
        }.rows
        var counts: [DownloadState: Int] = [:]
        for row in rows {
            guard let state = row[0].flatMap(DownloadState.init(rawValue:)), let count = row[1].flatMap({ Int($0) }) else { continue }
            counts[state, default: 0] += count
        }
        return counts
    }

    /// The rows of `ids` that exist (one statement per `pollBatch` ids), by id.
    func rows(ids: [String]) throws(StateStoreError) -> [String: ClusterRow] {
        var found: [String: ClusterRow] = [:]
        var start = 0
        while start < ids.count {
            let batch = ids[start..<min(ids.count, start + Self.pollBatch)]
            start += batch.count
            let rows = try pool.withConnection { db throws(StateStoreError) in
                try db.execute(Self.select + " WHERE d.id = ANY($1::text[])", [PostgresArray.literal(batch)])
            }.rows
            for row in rows {
                let parsed = try Self.row(row)
                found[parsed.stored.id] = parsed
            }
        }
        return found
    }

    /// A row of `select`.
    static func row(_ row: [String?]) throws(StateStoreError) -> ClusterRow {
        let n = PostgresStateStore.columns.count
        guard row.count == n + 11 else {
            throw StateStoreError(kind: .damaged, message: "postgres: a downloads row has \(row.count) columns, not \(n + 11)")
        }
        let stored = try PostgresStateStore.download(from: Array(row[0..<n]))
        let tokenCount = row[n].flatMap { Int($0) } ?? 0
        var heartbeat: Heartbeat?
        if row[n + 1] == "t", let key = row[n + 2], let epoch = row[n + 3].flatMap({ Int64($0) }),
           let bytes = row[n + 4].flatMap({ Int64($0) }), let callers = row[n + 5].flatMap({ Int($0) }) {
            heartbeat = Heartbeat(id: stored.id, leaseKey: key, epoch: epoch, bytesWritten: bytes, callers: callers,
                                  bytesPerSecond: row[n + 6].flatMap { Double($0) } ?? 0, etaSeconds: row[n + 7].flatMap { Double($0) },
                                  connectionsGranted: row[n + 8].flatMap { Int($0) } ?? 1,
                                  connectionsActive: row[n + 9].flatMap { Int($0) } ?? 0, reason: row[n + 10])
        }
        return ClusterRow(stored: stored, tokenCount: tokenCount, heartbeat: heartbeat)
    }
}
