/// The state database's tables, versioned by `PRAGMA user_version`: migration `n` takes a database
/// from version `n` to `n + 1`, in its own transaction. Append a migration for every change (never
/// edit a released one); a database from a newer build is refused, never downgraded.
enum SQLiteSchema {
    static let migrations: [String] = [
        // 1: downloads and their callers' token hashes. `row` is the order downloads were first
        // recorded: new ones append at the table's end, so a batch of new downloads touches few
        // pages however many are recorded. Lookups by id or URL happen in memory (the engine's and
        // the store's maps), so neither has an index that random ids would scatter writes over.
        """
        CREATE TABLE downloads (
            row INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            url TEXT NOT NULL,
            storage TEXT NOT NULL,
            state TEXT NOT NULL,
            etag TEXT,
            last_modified TEXT,
            expected_total INTEGER,
            verified_offset INTEGER NOT NULL,
            expected_sha256 TEXT,
            expected_size INTEGER,
            file_name TEXT,
            final_path TEXT,
            sha256 TEXT,
            size INTEGER,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            last_access REAL NOT NULL,
            error_code TEXT,
            error_message TEXT,
            error_http_status INTEGER
        );
        CREATE TABLE tokens (
            download INTEGER NOT NULL,
            hash BLOB NOT NULL,
            PRIMARY KEY (download, hash)
        ) WITHOUT ROWID;
        """,
        // 2: what `/fetch` names a download's body by: the origin's content type, the body's
        // version (its ETag when the origin gave none) and when it last changed. Added columns
        // only (no table rewrite); rows of version 1 read as version 0, no type, never changed.
        """
        ALTER TABLE downloads ADD COLUMN content_type TEXT;
        ALTER TABLE downloads ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE downloads ADD COLUMN changed_at REAL;
        """,
        // 3: completion webhooks (`WebhookJournal`): each caller's callback (its token's hash ties
        // it to the caller) and each delivery made, pending or ended; a delivery keeps its id and
        // exact body for every try. Written on their own connection, rarely.
        """
        CREATE TABLE webhook_registrations (
            id TEXT PRIMARY KEY,
            download TEXT NOT NULL,
            token_hash BLOB NOT NULL,
            url TEXT NOT NULL,
            events TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE webhook_deliveries (
            id TEXT PRIMARY KEY,
            registration TEXT NOT NULL,
            event TEXT NOT NULL,
            body BLOB NOT NULL,
            tries INTEGER NOT NULL,
            next_at REAL NOT NULL,
            outcome TEXT,
            reason TEXT,
            UNIQUE (registration, event)
        );
        """,
        // 4: named counters. `event_id`: the event feed (`GET /events`) hands out ids below
        // this value only, so they keep increasing across restarts.
        """
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        """,
        // 5: (issue 15, credentials) A credentialed download's keyed hash of its caller's headers
        // (HMAC-SHA256 under the installation's `coalescing.key`); the headers themselves are never
        // stored. NULL: a download made without headers.
        """
        ALTER TABLE downloads ADD COLUMN credential_key BLOB;
        """,
        // 6: segmented fetch: the connections the callers asked for, and each segment's range and
        // durable offset (`SegmentJournal`), so that every segment resumes where it stood.
        """
        ALTER TABLE downloads ADD COLUMN connections INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE downloads ADD COLUMN segments TEXT;
        """,
        // 7 (issue 14): the operator's holds (a download paused by the operator stays so until the
        // operator resumes it; deleted with the download) and the tombstones of removed downloads
        // (written with the row's deletion; a start-up drops any row they name and deletes the
        // files they list; the newest `Tombstone.limit` are kept). Own tables: no column added.
        """
        CREATE TABLE operator_holds (
            id TEXT PRIMARY KEY
        ) WITHOUT ROWID;
        CREATE TABLE tombstones (
            id TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            removed_at REAL NOT NULL,
            removed_by TEXT NOT NULL,
            paths TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
        // 8: segmented fetch: what keeps a download on one connection (its first answer offered no
        // ranges: 0, offered: 1, not seen: NULL; the origin refused a second connection: 1).
        """
        ALTER TABLE downloads ADD COLUMN ranges_offered INTEGER;
        ALTER TABLE downloads ADD COLUMN segments_refused INTEGER NOT NULL DEFAULT 0;
        """,
        // 9: the group of the client that asked first (fairness among clients, the bound of the
        // partials a client left), so that a restart keeps it.
        """
        ALTER TABLE downloads ADD COLUMN client_group TEXT;
        """,
    ]

    static var version: Int { migrations.count }

    /// Brings `db` up to the last of `migrations`. Throws `.newerSchema` for a database from a newer build.
    static func migrate(_ db: SQLiteConnection, migrations: [String] = migrations) throws(StateStoreError) {
        let found = Int(try db.text("PRAGMA user_version") ?? "0") ?? 0
        guard found <= migrations.count else {
            throw StateStoreError(kind: .newerSchema, message: "the state database has schema version \(found); this build knows "
                                  + "versions up to \(migrations.count) (a newer build wrote it): refusing to start")
        }
        for version in found..<migrations.count {
            try db.execute("BEGIN IMMEDIATE")
            do throws(StateStoreError) {
                try db.execute(migrations[version])
                try db.execute("PRAGMA user_version = \(version + 1)")
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }
}
