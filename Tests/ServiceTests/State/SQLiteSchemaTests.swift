import Foundation
import Testing
@testable import DownloaderEngine

/// Schema versions move forward only, each migration in its own transaction, data kept.
@Suite struct SQLiteSchemaTests {
    @Test func aNewDatabaseGetsTheCurrentSchema() throws {
        let directory = EngineFixture.root().path
        _ = try SQLiteStateStore.open(directory: directory)
        let db = try SQLiteConnection(path: directory + "/state.db")
        #expect(try db.text("PRAGMA user_version") == "\(SQLiteSchema.version)")
        #expect(try db.text("PRAGMA journal_mode") == "wal")
    }

    /// A database of schema version 1 (before content types and body versions were stored) opens
    /// under the current build: its rows load unchanged, with no type, version 0, never changed,
    /// and the new fields are kept from then on.
    @Test func aVersionOneDatabaseGainsTheBodyColumns() throws {
        let directory = EngineFixture.root().path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let db = try SQLiteConnection(path: directory + "/state.db")
        try SQLiteSchema.migrate(db, migrations: Array(SQLiteSchema.migrations.prefix(1)))
        try db.execute("""
            INSERT INTO downloads (row, id, url, storage, state, verified_offset, final_path, sha256, size, created_at, updated_at, last_access)
            VALUES (1, 'a', 'http://o.test/a', 'cache', 'completed', 0, '/c/a', '\(String(repeating: "ab", count: 32))', 5, 1000, 1001, 1002)
            """)
        #expect(try db.text("PRAGMA user_version") == "1")
        db.close()

        let store = try SQLiteStateStore.open(directory: directory).store
        var loaded = try store.load()
        #expect(loaded.count == 1 && loaded.first?.id == "a" && loaded.first?.state == .completed && loaded.first?.size == 5)
        #expect(loaded.first?.contentType == nil && loaded.first?.generation == 0 && loaded.first?.changedAt == nil)
        loaded[0].contentType = "text/plain"
        loaded[0].generation = 2
        loaded[0].changedAt = Date(timeIntervalSince1970: 1003)
        try store.commit(StateBatch(upserts: loaded))
        #expect(try StateFixture.read(directory) == loaded)
        let check = try SQLiteConnection(path: directory + "/state.db")
        #expect(try check.text("PRAGMA user_version") == "\(SQLiteSchema.version)")
    }

    /// A later build's migration (here: one made up for the test) runs on a database the current
    /// schema wrote: the rows survive it, the version moves on, and running it again changes nothing.
    @Test func migrationsRunForwardOnceAndKeepTheRows() throws {
        let directory = EngineFixture.root().path
        var entry = StateFixture.download("a", .paused)
        entry.tokens = [TokenHash(token: "t")]
        try StateFixture.write([entry], to: directory)
        let later = SQLiteSchema.migrations + [
            "ALTER TABLE downloads ADD COLUMN retain_until REAL; CREATE TABLE deliveries (id INTEGER PRIMARY KEY, body TEXT);",
        ]
        let db = try SQLiteConnection(path: directory + "/state.db")
        try SQLiteSchema.migrate(db, migrations: later)
        #expect(try db.text("PRAGMA user_version") == "\(later.count)")
        try SQLiteSchema.migrate(db, migrations: later)  // Already there: nothing runs (ALTER would fail twice).
        #expect(try db.text("SELECT count(*) FROM deliveries") == "0")
        #expect(try db.text("SELECT id FROM downloads WHERE retain_until IS NULL") == "a")
        // A failing migration leaves the version and the tables as they were.
        let broken = later + ["CREATE TABLE x (a); THIS IS NOT SQL;"]
        #expect(throws: StateStoreError.self) { try SQLiteSchema.migrate(db, migrations: broken) }
        #expect(try db.text("PRAGMA user_version") == "\(later.count)")
        #expect(try db.text("SELECT count(*) FROM sqlite_master WHERE name = 'x'") == "0")
        db.close()
        // The current build refuses the newer file rather than guess at it.
        #expect(throws: StateStoreError.self) { try SQLiteStateStore.open(directory: directory) }
    }
}
