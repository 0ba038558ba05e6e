import Foundation
import Testing
@testable import DownloaderEngine

/// A state area written by the journal-based release (`Fixtures/journal-v1`, see its README) is
/// imported once: downloads, tokens and partials keep working, and the journal is kept aside.
@Suite struct JournalImportTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/journal-v1")
    static let ids = (done: "7b28dda59060c448", keep: "bfa77bfbc9a7ee6e", missing: "b17c0abc9a83e6e1",
                      paused: "0cfa06b5774b851f", running: "6255eaf428d81a44")
    static let runningTokens = ["7deb76cb57e6afc0791653aa145a579b", "a0de6a691f2308ad12c2e3a7bf4a7afb"]
    static let doneTokens = ["72d72ca80efb4541797048c92a4963c7", "f53941881dc26f04e6f7ba306f6ddc2a"]

    /// A copy of the fixture under a fresh root, its journal pointing at that root.
    static func copyFixture() throws -> URL {
        let root = EngineFixture.root()
        for area in ["state", "cache", "data"] {
            try? FileManager.default.removeItem(at: root.appendingPathComponent(area))
            try FileManager.default.copyItem(at: fixture.appendingPathComponent(area), to: root.appendingPathComponent(area))
        }
        let journal = root.appendingPathComponent("state/journal.json")
        let text = try String(contentsOf: journal, encoding: .utf8)
        try Data(text.replacingOccurrences(of: "@ROOT@", with: root.path).utf8).write(to: journal)
        return root
    }

    /// The fixture is months old by now: nothing may expire for its age.
    static func engine(_ root: URL, driver: FakeTransferDriver) throws -> DownloadEngine {
        try EngineFixture.engine(root, driver: driver) { c in
            c.pausedTTL = 1e10
            c.failedRetention = 1e10
        }
    }

    @Test func aJournalWrittenByTheJournalReleaseIsImportedOnce() async throws {
        let root = try Self.copyFixture()
        let state = root.appendingPathComponent("state").path
        let journalBytes = try #require(FileManager.default.contents(atPath: state + "/journal.json"))
        let body = EngineFixture.body(100_000)
        let driver = FakeTransferDriver()
        let engine = try Self.engine(root, driver: driver)
        #expect(engine.importedJournal?.downloads == 5 && engine.importedJournal?.keptAt == state + "/journal.json.imported")
        #expect(!FileManager.default.fileExists(atPath: state + "/journal.json"))
        #expect(FileManager.default.contents(atPath: state + "/journal.json.imported") == journalBytes)
        #expect(engine.recovery.loaded == 5 && engine.recovery.dropped == 0)

        // Completed files are served, failures remembered, the paused partial kept.
        #expect(engine.completedFile(id: Self.ids.done)?.sha256 == SHA256Hasher.hex(Array(body.prefix(1000))))
        #expect(engine.completedFile(id: Self.ids.keep)?.path == root.appendingPathComponent("data/\(Self.ids.keep)-keep.bin").path)
        #expect(engine.snapshot(id: Self.ids.missing)?.error?.httpStatus == 404)
        let paused = try #require(engine.snapshot(id: Self.ids.paused))
        #expect(paused.state == .paused && paused.bytesWritten == 40_000 && paused.resumable)

        // The running download carried on by itself from its kept bytes, with both callers.
        try await withTimeout(5) { await driver.waitForStarts(1) }
        let resumed = driver.transfer(0)
        #expect(resumed.request.url == "http://o.test/running.bin")
        #expect(resumed.header("Range") == "bytes=30000-" && resumed.header("If-Range") == "\"r1\"")
        #expect(engine.snapshot(id: Self.ids.running)?.callers == 2)
        // Tokens from the journal still work, and are stored only as hashes.
        #expect(engine.cancel(token: Self.runningTokens[0])?.id == Self.ids.running)
        #expect(engine.liveTokens(among: Self.doneTokens + Self.runningTokens) == Set(Self.doneTokens + [Self.runningTokens[1]]))
        let bytes = StateFixture.fileBytes(state)
        for token in Self.doneTokens + Self.runningTokens {
            #expect(!bytes.contains(bytes: Array(token.utf8)), "token \(token) stored in clear")
        }
        #expect(bytes.contains(bytes: TokenHash(token: Self.doneTokens[0]).digest))
        #expect(resumed.respond(206, ["Content-Range": "bytes 30000-99999/100000", "ETag": "\"r1\""]))
        try resumed.send(Array(body[30_000...]))
        resumed.finish()
        let done = try await withTimeout(5) { try await EngineFixture.waitFor(engine, id: Self.ids.running, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body))
        await engine.shutdown()

        // The next start reads the database alone.
        let next = try Self.engine(root, driver: FakeTransferDriver())
        #expect(next.importedJournal == nil && next.recovery.loaded == 5)
        #expect(next.cancel(token: Self.runningTokens[1])?.id == Self.ids.running)
        #expect(next.snapshot(id: Self.ids.paused)?.bytesWritten == 40_000)
        await next.shutdown()
    }

    /// A crash after the import's commit but before the journal was renamed imports it again: the
    /// same downloads, written over themselves, nothing doubled.
    @Test func aSecondImportOfTheSameJournalChangesNothing() async throws {
        let root = try Self.copyFixture()
        let state = root.appendingPathComponent("state").path
        let journal = try #require(FileManager.default.contents(atPath: state + "/journal.json"))
        let first = try Self.engine(root, driver: FakeTransferDriver())
        await first.shutdown()
        let stored = try StateFixture.read(state)
        try journal.write(to: URL(fileURLWithPath: state + "/journal.json"))
        let second = try Self.engine(root, driver: FakeTransferDriver())
        #expect(second.importedJournal?.downloads == 5 && second.importedJournal?.keptAt == state + "/journal.json.imported-2")
        #expect(second.list().count == 5)
        let again = try StateFixture.read(state)
        #expect(again.count == 5 && Set(again.map(\.id)) == Set(stored.map(\.id)))
        await second.shutdown()
    }

    @Test func anUnreadableJournalIsKeptAsideAndTheEngineStartsWithout() throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try Data("not json".utf8).write(to: state.appendingPathComponent("journal.json"))
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let aside = state.appendingPathComponent("journal.json.corrupt").path
        #expect(engine.recovery.corruptJournalKeptAt == aside && engine.stateSetAside == [aside])
        #expect(engine.importedJournal == nil && engine.list().isEmpty)
        #expect(try String(contentsOfFile: aside, encoding: .utf8) == "not json")
    }

    /// A failure code from a newer build's journal: the download is kept, failed with `.unknown`,
    /// and the store keeps the original string when the download is written back.
    @Test func aFailureWithAnUnknownCodeSurvivesTheImportAndARestart() async throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let now = Date().timeIntervalSince1970
        let journal = #"{"downloads":[{"createdAt":\#(now),"error":{"code":"quota_exceeded","message":"over quota"},"#
            + #""id":"0123456789abcdef","lastAccess":\#(now),"state":"failed","storage":"cache","updatedAt":\#(now),"#
            + #""tokens":["00112233445566778899aabbccddeeff"],"url":"http://o.test/q","verifiedOffset":0}],"version":1}"#
        try Data(journal.utf8).write(to: state.appendingPathComponent("journal.json"))
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(engine.recovery.loaded == 1 && engine.recovery.corruptJournalKeptAt == nil)
        let failed = try #require(engine.snapshot(id: "0123456789abcdef"))
        #expect(failed.state == .failed && failed.error?.code == .unknown && failed.error?.message == "over quota")
        #expect(try StateFixture.read(state.path).first?.error?.journalCode == "quota_exceeded", "imported as it was")
        // Its caller leaves: the download is written again, the code with it.
        #expect(engine.cancel(token: "00112233445566778899aabbccddeeff")?.callers == 0)
        let stored = try #require(try StateFixture.stored(engine).first)
        #expect(stored.tokens.isEmpty && stored.error?.journalCode == "quota_exceeded" && stored.error?.message == "over quota")
        await engine.shutdown()
    }
}
