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
