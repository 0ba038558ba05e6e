import Foundation
import Testing
@testable import DownloaderEngine

/// A state area written by the journal-based release (`Fixtures/journal-v1`, see its README) is
/// imported once: downloads, tokens and partials keep working, and the journal (tokens in clear)
/// is deleted. What cannot be imported is kept for the operator, with the files it names.
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
        let body = EngineFixture.body(100_000)
        let driver = FakeTransferDriver()
        let engine = try Self.engine(root, driver: driver)
        #expect(engine.importedJournal?.downloads == 5 && engine.importedJournal?.skipped == 0 && engine.importedJournal?.keptAt == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix("journal") }.isEmpty)
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

    /// A crash after the import's commit but before the journal was deleted imports it again: the
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
        #expect(second.importedJournal?.downloads == 5 && second.importedJournal?.keptAt == nil)
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
        #expect(engine.recovery.journal == .unreadable(keptAt: aside) && engine.stateSetAside == [aside])
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
        #expect(engine.recovery.loaded == 1 && engine.importedJournal?.skipped == 0)
        let failed = try #require(engine.snapshot(id: "0123456789abcdef"))
        #expect(failed.state == .failed && failed.error?.code == .unknown && failed.error?.message == "over quota")
        #expect(try StateFixture.read(state.path).first?.error?.journalCode == "quota_exceeded", "imported as it was")
        // Its caller leaves: the download is written again, the code with it.
        #expect(engine.cancel(token: "00112233445566778899aabbccddeeff")?.callers == 0)
        let stored = try #require(try StateFixture.stored(engine).first)
        #expect(stored.tokens.isEmpty && stored.error?.journalCode == "quota_exceeded" && stored.error?.message == "over quota")
        await engine.shutdown()
    }

    /// A journal entry (fields as `JournalImport` documents them) at `now`, its extra fields appended.
    static func entry(_ id: String, _ url: String, state: String = "paused", _ extra: String = "") -> String {
        let now = Date().timeIntervalSince1970
        return #"{"createdAt":\#(now),"id":"\#(id)","lastAccess":\#(now),"state":"\#(state)","storage":"cache","#
            + #""updatedAt":\#(now),"url":"\#(url)","verifiedOffset":0\#(extra)}"#
    }

    static func writeJournal(_ entries: [String], in state: URL) throws {
        try FileManager.default.createDirectory(at: state.appendingPathComponent("partials"), withIntermediateDirectories: true)
        let document = #"{"version":1,"downloads":["# + entries.joined(separator: ",") + "]}"
        try Data(document.utf8).write(to: state.appendingPathComponent("journal.json"))
    }

    /// An entry that does not decode costs only itself; the journal is kept for the operator, and
    /// nothing is swept while it is there (its partial would look like an orphan).
    @Test func anEntryThatDoesNotDecodeIsSkippedAndItsFilesStay() async throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try Self.writeJournal([Self.entry("0123456789abcdef", "http://o.test/a"),
                               Self.entry("fedcba9876543210", "http://o.test/b", #","expectedTotal":1000.5"#)], in: state)
        let partial = state.appendingPathComponent("partials/fedcba9876543210.part").path
        RecoveryScaleTests.file(partial, [1, 2, 3])
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let kept = state.appendingPathComponent("journal.json.incomplete").path
        #expect(engine.importedJournal?.downloads == 1 && engine.importedJournal?.skipped == 1 && engine.importedJournal?.keptAt == kept)
        #expect(engine.snapshot(id: "0123456789abcdef")?.state == .paused && engine.list().count == 1)
        #expect(FileStore.fileSize(partial) == 3 && FileStore.fileSize(kept) != nil)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: kept)[.posixPermissions] as? Int)
        #expect(mode == 0o600, "it holds tokens in clear")
        await engine.shutdown()
        // Not swept at the next start either, while the kept journal is there; then swept.
        let next = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(next.journalsKeptEarlier == [kept] && FileStore.fileSize(partial) == 3)
        await next.shutdown()
        try FileManager.default.removeItem(atPath: kept)
        let last = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(last.journalsKeptEarlier.isEmpty && FileStore.fileSize(partial) == nil)
        await last.shutdown()
    }

    /// An earlier release kept the imported journal, caller tokens in clear: it goes.
    @Test func theImportedCopiesAnEarlierReleaseKeptAreDeleted() async throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        for name in ["journal.json.imported", "journal.json.imported-2"] {
            try Data("{}".utf8).write(to: state.appendingPathComponent(name))
        }
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasPrefix("journal") }.isEmpty)
        await engine.shutdown()
    }

    @Test func anUnreadableJournalLeavesEveryFileInPlace() throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state.appendingPathComponent("partials"), withIntermediateDirectories: true)
        try Data("{\"version\":1,".utf8).write(to: state.appendingPathComponent("journal.json"))
        let partial = state.appendingPathComponent("partials/fedcba9876543210.part").path
        RecoveryScaleTests.file(partial, [1, 2, 3])
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(engine.stateSetAside == [state.appendingPathComponent("journal.json.corrupt").path])
        #expect(FileStore.fileSize(partial) == 3)
    }

    /// A journal that is there but cannot be read (here: a directory) stops start-up: going on
    /// without it would sweep the files it names.
    @Test func aJournalThatCannotBeReadStopsStartUp() throws {
        let root = EngineFixture.root()
        let journal = root.appendingPathComponent("state/journal.json")
        try FileManager.default.createDirectory(at: journal, withIntermediateDirectories: true)
        #expect(throws: StateStoreError.self) { try EngineFixture.engine(root, driver: FakeTransferDriver()) }
    }

    /// `user:password@` in a journal's URL becomes the download's credential, as for a new request:
    /// the download is private, the password stored nowhere, and a caller giving it joins.
    @Test func urlCredentialsInTheJournalAreNotStoredAndKeepTheDownloadPrivate() async throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try Self.writeJournal([Self.entry("0123456789abcdef", "http://alice:s3cret@o.test/p", state: "failed",
                                          #","error":{"code":"http_error","message":"HTTP 503"}"#)], in: state)
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver()) { $0.allowURLCredentials = true }
        let imported = try #require(engine.snapshot(id: "0123456789abcdef"))
        #expect(imported.isPrivate && imported.url == "http://o.test/p")
        engine.core.stateWriter.flush()
        let bytes = StateFixture.fileBytes(state.path)
        #expect(bytes.contains(bytes: Array("http://o.test/p".utf8)), "the search finds what is stored")
        #expect(!bytes.contains(bytes: Array("s3cret".utf8)) && !bytes.contains(bytes: Array("YWxpY2U6czNjcmV0".utf8)))
        #expect(try engine.request(DownloadRequest(url: "http://o.test/p")).snapshot.id != imported.id, "not for callers without it")
        #expect(try engine.request(DownloadRequest(url: "http://alice:s3cret@o.test/p")).snapshot.id == imported.id)
        await engine.shutdown()
    }
}
