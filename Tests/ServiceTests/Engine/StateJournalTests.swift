import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct StateJournalTests {
    static func entry(_ id: String, _ state: DownloadState) -> JournalEntry {
        JournalEntry(id: id, url: "http://o.test/\(id)", storage: .cache, state: state,
                     validator: Validator(etag: "\"e\""), expectedTotal: 100, verifiedOffset: 40,
                     expectedSHA256: nil, expectedSize: 100, fileName: "f", finalPath: nil, sha256: nil, size: nil,
                     createdAt: Date(timeIntervalSince1970: 1000), updatedAt: Date(timeIntervalSince1970: 1001),
                     lastAccess: Date(timeIntervalSince1970: 1002),
                     error: DownloadFailure(code: .httpError, message: "m", httpStatus: 403))
    }

    @Test func roundTrip() throws {
        let dir = EngineFixture.root().path
        let journal = StateJournal(directory: dir)
        #expect(journal.load() == .empty)
        let entries = [Self.entry("a", .paused), Self.entry("b", .downloading)]
        try journal.write(try #require(StateJournal.encode(entries)))
        #expect(journal.load() == .loaded(entries))
        #expect(!FileManager.default.fileExists(atPath: journal.path + ".tmp"))
    }

    @Test func crashLeftoversDoNotBreakLoading() throws {
        let dir = EngineFixture.root().path
        let journal = StateJournal(directory: dir)
        let entries = [Self.entry("a", .paused)]
        try journal.write(try #require(StateJournal.encode(entries)))
        // A crash mid-write leaves a torn temp file; the real journal is untouched.
        try Data("{\"version\":1,\"downl".utf8).write(to: URL(fileURLWithPath: journal.path + ".tmp"))
        #expect(journal.load() == .loaded(entries))
        try journal.write(try #require(StateJournal.encode([])))
        #expect(journal.load() == .loaded([]))
    }

    @Test func corruptJournalIsKeptAsideAndStartsFresh() throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try Data("not json".utf8).write(to: state.appendingPathComponent("journal.json"))
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(engine.recovery.corruptJournalKeptAt == state.appendingPathComponent("journal.json.corrupt").path)
        #expect(engine.list().isEmpty)
        #expect(try String(contentsOfFile: state.appendingPathComponent("journal.json.corrupt").path, encoding: .utf8) == "not json")
    }

    @Test func writerKeepsNewest() throws {
        let dir = EngineFixture.root().path
        let writer = JournalWriter(journal: StateJournal(directory: dir))
        for i in 1...50 { writer.submit([Self.entry("\(i)", .paused)], generation: UInt64(i)) }
        writer.submit([Self.entry("old", .paused)], generation: 3)
        writer.flush()
        #expect(StateJournal(directory: dir).load() == .loaded([Self.entry("50", .paused)]))
    }
}
