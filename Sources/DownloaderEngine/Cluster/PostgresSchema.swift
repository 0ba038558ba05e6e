/// The cluster database's tables, versioned by the rows of `schema_migrations`: migration `n` takes
/// the database from version `n` to `n + 1`. Every replica runs `migrate` at start-up, all of it in
/// one transaction that first takes a transaction-scoped advisory lock, so replicas starting at once
/// apply each migration exactly once (the others wait, then find nothing left to do). Append a
/// migration for every change (never edit a released one); a database from a newer build is refused.
/// Needs no superuser and no extension: the role only has to own its database.
enum PostgresSchema {
    /// `pg_advisory_xact_lock` key of migrations (an arbitrary constant: "dlsvschm").
    static let migrationLock: Int64 = 0x646C_7376_7363_686D

    static let migrations: [String] = [
        // 1: downloads, their callers' token hashes (SHA-256, never the token), and the leases that
        // say which replica transfers what. `seq` keeps the order downloads were first recorded.
        // Times of downloads are the engine's (seconds since 1970); `expires_at` is the database's
        // clock, so replicas' clocks never have to agree.
        """
        CREATE TABLE downloads (
            id text PRIMARY KEY,
            seq bigserial NOT NULL,
            url text NOT NULL,
            storage text NOT NULL,
            state text NOT NULL,
            etag text,
            last_modified text,
            expected_total bigint,
            verified_offset bigint NOT NULL,
            expected_sha256 text,
            expected_size bigint,
            file_name text,
            final_path text,
            sha256 text,
            size bigint,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            last_access double precision NOT NULL,
            error_code text,
            error_message text,
            error_http_status integer,
            content_type text,
            generation bigint NOT NULL DEFAULT 0,
            changed_at double precision
        );
        CREATE INDEX downloads_seq ON downloads (seq);
        CREATE TABLE tokens (
            download text NOT NULL REFERENCES downloads (id) ON DELETE CASCADE,
            hash bytea NOT NULL,
            PRIMARY KEY (download, hash)
        );
        CREATE TABLE leases (
            key text PRIMARY KEY,
            owner text NOT NULL,
            owner_url text NOT NULL,
            epoch bigint NOT NULL,
            expires_at timestamptz NOT NULL,
            active boolean NOT NULL DEFAULT true,
            part_file text,
            durable_offset bigint NOT NULL DEFAULT 0
        );
        CREATE INDEX leases_lapsed ON leases (expires_at) WHERE active;
        """,
        // 2: what the single process stores since (SQLite migrations 5 and 6): a credentialed
        // download's keyed hash of its caller's headers (hex; never the headers), and segmented
        // fetch's connections and segments.
        """
        ALTER TABLE downloads ADD COLUMN credential_key text,
            ADD COLUMN connections integer NOT NULL DEFAULT 1,
            ADD COLUMN segments text;
        """,
        // 3: the key of the lease that fences a download's row (`CoalescingKey.leaseName`), so that a
        // replica taking a lease over finds the download it covers; and the operator's hold (a
        // download adopted by another replica stays held).
        """
        ALTER TABLE downloads ADD COLUMN lease_key text, ADD COLUMN held boolean NOT NULL DEFAULT false;
        CREATE INDEX downloads_lease_key ON downloads (lease_key);
        """,
        // 4: reads on any replica (`ClusterReader`): the holder's heartbeat of what a snapshot shows
        // beyond the row (bytes so far, callers, rate, connections), with the lease key and epoch
        // that wrote it (it counts only while that epoch's lease is active), and the indexes of
        // the newest-first list and of a token's lookup by its hash.
        """
        ALTER TABLE downloads ADD COLUMN hb_lease_key text,
            ADD COLUMN hb_epoch bigint,
            ADD COLUMN hb_bytes_written bigint,
            ADD COLUMN hb_callers integer,
            ADD COLUMN hb_bytes_per_second double precision,
            ADD COLUMN hb_eta_seconds double precision,
            ADD COLUMN hb_connections_granted integer,
            ADD COLUMN hb_connections_active integer,
            ADD COLUMN hb_at timestamptz;
        CREATE INDEX downloads_newest ON downloads (created_at DESC, id COLLATE "C" DESC);
        CREATE INDEX tokens_hash ON tokens (hash);
        """,
        // 5: the heartbeat's lease key was `lease_key` again (a download's lease key never changes):
        // heartbeats are written and read against `lease_key`, and `hb_lease_key` goes.
        """
        UPDATE downloads SET lease_key = hb_lease_key WHERE lease_key IS NULL AND hb_lease_key IS NOT NULL;
        ALTER TABLE downloads DROP COLUMN hb_lease_key;
        """,
        // 6: the tombstones of removed downloads (SQLite migration 7's table), written in the
        // transaction that deletes the row, by the holder of the download's lease (fenced): no
        // write brings a tombstoned id back and a relayed stream says who removed it. `seq` keeps
        // the order they were written (the newest `Tombstone.limit` are kept); `paths` one per line.
        // (The operator's holds need no table here: the `held` column of migration 3.)
        """
        CREATE TABLE tombstones (
            id text PRIMARY KEY,
            seq bigserial NOT NULL,
            url text NOT NULL,
            removed_at double precision NOT NULL,
            removed_by text NOT NULL,
            paths text NOT NULL
        );
        CREATE INDEX tombstones_seq ON tombstones (seq);
        """,
        // 7: `--max-downloads-per-client` across replicas (`ClientTokenStore`): the client address
        // each caller token (or a place reserved for one) was given to, and the secret replicas
        // sign a forwarded request's client address with (created by the first replica to start).
        """
        CREATE TABLE client_tokens (
            hash bytea PRIMARY KEY,
            client text NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX client_tokens_client ON client_tokens (client);
        CREATE TABLE cluster_secrets (name text PRIMARY KEY, secret bytea NOT NULL);
        """,
        // 8: the cluster-wide event feed (`ClusterFeedStore`, `GET /events` on any replica). Every
        // change of a downloads row (a write of anything but `hb_at`) clears its `feed_seq` (its
        // progress is to be told); every lifecycle change (created, a new state or body version,
        // deleted) appends a `feed_log` entry, which nothing overwrites. Replicas then stamp what is
        // unstamped with `feed_versions` (log entries first), one stamper at a time (an advisory
        // lock), so the stamps visible to any reader are always a prefix of the sequence: reading
        // "stamped above my cursor" never misses a change that commits late. Writers keep their
        // statements (triggers do it).
        """
        CREATE SEQUENCE feed_versions;
        ALTER TABLE downloads ADD COLUMN feed_seq bigint;
        CREATE INDEX downloads_feed_seq ON downloads (feed_seq);
        CREATE INDEX downloads_unstamped ON downloads (id) WHERE feed_seq IS NULL;
        CREATE TABLE feed_log (
            n bigserial PRIMARY KEY,
            id text NOT NULL,
            kind text NOT NULL,
            old_state text,
            new_state text,
            old_generation bigint,
            new_generation bigint,
            feed_seq bigint,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX feed_log_seq ON feed_log (feed_seq);
        CREATE INDEX feed_log_unstamped ON feed_log (n) WHERE feed_seq IS NULL;
        CREATE FUNCTION feed_unstamp() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.feed_seq IS NOT DISTINCT FROM OLD.feed_seq
               AND (to_jsonb(NEW) - 'hb_at') IS DISTINCT FROM (to_jsonb(OLD) - 'hb_at') THEN
                NEW.feed_seq := NULL;
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER downloads_feed_unstamp BEFORE UPDATE ON downloads FOR EACH ROW EXECUTE FUNCTION feed_unstamp();
        CREATE FUNCTION feed_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO feed_log (id, kind, new_state, new_generation) VALUES (NEW.id, 'created', NEW.state, NEW.generation);
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO feed_log (id, kind, old_state, old_generation) VALUES (OLD.id, 'removed', OLD.state, OLD.generation);
            ELSIF NEW.state IS DISTINCT FROM OLD.state OR NEW.generation IS DISTINCT FROM OLD.generation THEN
                INSERT INTO feed_log (id, kind, old_state, new_state, old_generation, new_generation)
                    VALUES (NEW.id, 'changed', OLD.state, NEW.state, OLD.generation, NEW.generation);
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER downloads_feed_log AFTER INSERT OR UPDATE OR DELETE ON downloads FOR EACH ROW EXECUTE FUNCTION feed_log_change();
        """,
        // 9: completion webhooks for the cluster (`ClusterWebhookStore`; SQLite migration 3's tables,
        // with a claim): a registration made on any replica is seen by all; one delivery per
        // registration and event (the unique key: replicas that see the same end make it once); a
        // replica sends a delivery only under its claim (`claimed_by` until `claim_until`, the
        // database's clock), so one replica tries it at a time and another takes it over when the
        // claim lapses (its sender died).
        """
        CREATE TABLE webhook_registrations (
            id text PRIMARY KEY,
            download text NOT NULL,
            token_hash bytea NOT NULL,
            url text NOT NULL,
            events text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX webhook_registrations_download ON webhook_registrations (download);
        CREATE INDEX webhook_registrations_token ON webhook_registrations (token_hash);
        CREATE TABLE webhook_deliveries (
            id text PRIMARY KEY,
            registration text NOT NULL REFERENCES webhook_registrations (id) ON DELETE CASCADE,
            event text NOT NULL,
            body bytea NOT NULL,
            tries integer NOT NULL DEFAULT 0,
            next_at timestamptz NOT NULL DEFAULT now(),
            outcome text,
            reason text,
            claimed_by text,
            claim_until timestamptz,
            UNIQUE (registration, event)
        );
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE outcome IS NULL;
        """,
        // 10: lease rows no download names any more are deleted (`LeaseStore.forgetIdle`); a key's
        // row made again starts above every epoch deleted (the floor), so epochs of one key still
        // only ever grow.
        """
        CREATE TABLE lease_epoch_floor (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), epoch bigint NOT NULL);
        INSERT INTO lease_epoch_floor (epoch) VALUES (0);
        CREATE INDEX leases_idle ON leases (expires_at) WHERE NOT active;
        """,
        // 11: segmented fetch: what keeps a download on one connection (its first answer offered
        // no ranges; the origin refused a second connection), as the SQLite store keeps it.
        """
        ALTER TABLE downloads ADD COLUMN ranges_offered boolean, ADD COLUMN segments_refused boolean NOT NULL DEFAULT false;
        """,
        // 12: why a running download waits, from its holder's heartbeat (`disk_full` while it waits
        // for disk space), so that the other replicas show it too. Older replicas leave it alone.
        """
        ALTER TABLE downloads ADD COLUMN hb_reason text;
        """,
        // 13: the group of the client that asked first, as the SQLite store keeps it: a replica
        // taking a download over keeps its client's place. Older replicas leave it alone.
        """
        ALTER TABLE downloads ADD COLUMN client_group text;
        """,
    ]

    static var version: Int { migrations.count }

    /// Seconds one migration statement may take (`migrate`).
    static let migrationTimeout: Double = 300
    /// Seconds a migration waits for a table's lock (`lock_timeout`): short, because the other
    /// replicas' statements on that table queue behind its request (a lease renewal among them).
    static let migrationLockWait: Double = 1

    /// Brings the database up to the last of `migrations`; safe to run from several replicas at once.
    /// Throws `.newerSchema` for a database from a newer build. A migration's statements may take up
    /// to `migrationTimeout` seconds each (a table rewritten, an index built on a large table), but
    /// wait at most `migrationLockWait` for a table's lock: a migration queued behind another
    /// session's transaction would hold every other replica's statements on that table behind it
    /// meanwhile (it fails instead; start-up tries again within its 10 s).
    static func migrate(_ db: PostgresConnection, migrations: [String] = migrations) throws(StateStoreError) {
        let usual = db.statementTimeout
        db.statementTimeout = max(usual, migrationTimeout)
        defer { db.statementTimeout = usual }
        try db.transaction { () throws(StateStoreError) in
            try db.execute("SET LOCAL statement_timeout = \(PostgresConnection.serverTimeout(migrationTimeout))")
            try db.execute("SELECT pg_advisory_xact_lock($1)", [String(migrationLock)])
            try db.execute("SET LOCAL lock_timeout = '\(Int(migrationLockWait * 1000))ms'")
            try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                           + "applied_at timestamptz NOT NULL DEFAULT now())")
            let found = Int(try db.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").scalar ?? "0") ?? 0
            guard found <= migrations.count else {
                throw StateStoreError(kind: .newerSchema, message: "the cluster database has schema version \(found); this build "
                                      + "knows versions up to \(migrations.count) (a newer build wrote it): refusing to start")
            }
            for version in found..<migrations.count {
                try db.execute(migrations[version])
                try db.execute("INSERT INTO schema_migrations (version) VALUES ($1)", [String(version + 1)])
            }
        }
    }
}
