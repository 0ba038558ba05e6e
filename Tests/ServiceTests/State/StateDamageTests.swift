import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A torn or damaged database: a torn WAL tail costs only the commit it tore; a damaged file is kept
/// aside (never deleted) and the engine starts with an empty one; a newer build's file is refused.
@Suite struct StateDamageTests {
    static func copy(_ from: String, _ to: String) throws {
        try FileManager.default.copyItem(atPath: from, toPath: to)
    }

    /// The database and its WAL as a crash leaves them (copied while the connection is open, so
    /// nothing is checkpointed), with the WAL's last `cut` bytes torn off or its last frame damaged.
    @Test(arguments: ["truncated", "garbled"])
    func aTornWALTailLosesOnlyTheCommitItTore(kind: String) throws {
        let live = EngineFixture.root().path
        let store = try SQLiteStateStore.open(directory: live).store
        let first = [StateFixture.download("a", .paused), StateFixture.download("b", .completed)]
        try store.commit(StateBatch(upserts: first))
        let walAfterFirst = try #require(FileStore.fileSize(live + "/state.db-wal"))
        var changed = first[0]
        changed.state = .failed
        try store.commit(StateBatch(upserts: [changed, StateFixture.download("c", .queued)]))
        let wal = try #require(FileStore.fileSize(live + "/state.db-wal"))
        #expect(wal > walAfterFirst)

        let crashed = EngineFixture.root().path
        try Self.copy(live + "/state.db", crashed + "/state.db")
        try Self.copy(live + "/state.db-wal", crashed + "/state.db-wal")
        let fd = open(crashed + "/state.db-wal", O_RDWR)
        #expect(fd >= 0)
        if kind == "truncated" {
            #expect(ftruncate(fd, off_t(wal - 100)) == 0)
        } else {
            var junk = [UInt8](repeating: 0xA5, count: 64)
            #expect(pwrite(fd, &junk, junk.count, off_t(wal - 2000)) == junk.count)
        }
        close(fd)
        let opened = try SQLiteStateStore.open(directory: crashed)
        #expect(opened.damagedKeptAt == nil)
        #expect(try opened.store.load() == first, "the torn commit is gone, the one before it whole")
    }

    @Test func aDamagedDatabaseIsKeptAsideAndTheEngineStartsEmpty() async throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        // A real database with two downloads, closed (checkpointed), then damaged in its pages.
        let downloads = (0..<200).map { StateFixture.download(String(format: "%016x", $0), .failed) }
        try StateFixture.write(downloads, to: state.path)
        let path = state.appendingPathComponent("state.db").path
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "closing checkpoints and removes the WAL")
        let size = try #require(FileStore.fileSize(path))
        let fd = open(path, O_RDWR)
        var junk = [UInt8](repeating: 0x5A, count: 3000)
        #expect(pwrite(fd, &junk, junk.count, off_t(size / 2)) == junk.count)
        close(fd)
        let damaged = try #require(FileManager.default.contents(atPath: path))
        // A partial the damaged database names: an orphan to the empty one that replaces it.
        let partials = state.appendingPathComponent("partials")
        try FileManager.default.createDirectory(at: partials, withIntermediateDirectories: true)
        let partial = partials.appendingPathComponent("0000000000000007.part").path
        try Data(repeating: 1, count: 100).write(to: URL(fileURLWithPath: partial))
        // A partial set aside for deletion before a crash: decided, so swept all the same.
        let trashed = partials.appendingPathComponent("0000000000000008.part.3.trash").path
        try Data(repeating: 2, count: 100).write(to: URL(fileURLWithPath: trashed))

        let aside = path + ".damaged"
        do {
            let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
            #expect(engine.recovery.damagedStateKeptAt == aside && engine.stateSetAside == [aside])
            #expect(engine.list().isEmpty)
            #expect(FileManager.default.contents(atPath: aside) == damaged, "kept as it was")
            #expect(engine.stateDamage?.contains("integrity") == true, "\(engine.stateDamage ?? "no reason")")
            #expect(FileManager.default.fileExists(atPath: partial), "nothing swept while the damaged database is kept")
            #expect(!FileManager.default.fileExists(atPath: trashed), "but what was set aside for deletion")
            // The fresh database works.
            let r = try engine.request(DownloadRequest(url: "http://o.test/after"))
            #expect(try StateFixture.stored(engine).map(\.id) == [r.snapshot.id])
            await engine.shutdown()
        }
        // Once the engine is gone (its last queued work done) its connection is closed: the WAL is
        // checkpointed and removed. A second damaged file does not replace the first one kept.
        try await withTimeout(10) {
            while FileManager.default.fileExists(atPath: path + "-wal") { try await Task.sleep(for: .milliseconds(20)) }
        }
        try Data("not a database, not at all, not even close to one".utf8).write(to: URL(fileURLWithPath: path))
        do {
            let next = try EngineFixture.engine(root, driver: FakeTransferDriver())
            #expect(next.recovery.damagedStateKeptAt == aside + "-2")
            #expect(next.damagedStatesKeptEarlier == [aside])
            #expect(FileManager.default.contents(atPath: aside) == damaged)
            #expect(next.list().isEmpty)
            #expect(FileManager.default.fileExists(atPath: partial))
            await next.shutdown()
        }
        // Once the operator removed them (salvaged or not), a start sweeps again.
        try await withTimeout(10) {
            while FileManager.default.fileExists(atPath: path + "-wal") { try await Task.sleep(for: .milliseconds(20)) }
        }
        for kept in SQLiteStateStore.keptDamaged(in: state.path) { try FileManager.default.removeItem(atPath: kept) }
        let swept = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(swept.damagedStatesKeptEarlier.isEmpty && swept.recovery.damagedStateKeptAt == nil)
        #expect(!FileManager.default.fileExists(atPath: partial), "an orphan once nothing could claim it")
        await swept.shutdown()
    }

    /// A database is set aside with its `-wal` and `-shm` under one name, every new name in place
    /// before an old one goes; a name any of them holds already is not taken.
    @Test func aDatabaseIsSetAsideWithItsCompanions() throws {
        let path = EngineFixture.root().appendingPathComponent("state.db").path
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        for (suffix, text) in [("", "db"), ("-wal", "wal"), ("-shm", "shm"), (".damaged-wal", "an earlier crash's")] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path + suffix))
        }
        let aside = try FileStore.setAside(path, suffix: ".damaged", companions: ["-wal", "-shm"])
        #expect(aside == path + ".damaged-2")
        for (suffix, text) in [("", "db"), ("-wal", "wal"), ("-shm", "shm")] {
            #expect(FileManager.default.contents(atPath: aside + suffix) == Data(text.utf8))
            #expect(!FileManager.default.fileExists(atPath: path + suffix))
        }
        #expect(FileManager.default.contents(atPath: path + ".damaged-wal") == Data("an earlier crash's".utf8))
    }

    @Test func aDatabaseFromANewerBuildIsRefusedAndLeftAlone() throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state").path
        try StateFixture.write([StateFixture.download("a", .paused)], to: state)
        let db = try SQLiteConnection(path: state + "/state.db")
        try db.execute("PRAGMA user_version = \(SQLiteSchema.version + 1)")
        db.close()
        #expect(throws: StateStoreError.self) { try EngineFixture.engine(root, driver: FakeTransferDriver()) }
        do {
            _ = try SQLiteStateStore.open(directory: state)
            Issue.record("a newer schema was opened")
        } catch {
            #expect(error.kind == .newerSchema && error.message.contains("newer build"))
        }
        #expect(!FileManager.default.fileExists(atPath: state + "/state.db.damaged"))
        #expect(FileManager.default.fileExists(atPath: state + "/state.db"))
    }
}
