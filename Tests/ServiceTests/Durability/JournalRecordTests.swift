import Foundation
import Testing
@testable import DownloaderEngine

/// Pins the journal's record to `DownloadRecord`: every journaled field survives a write, a load and
/// a restore. A field added to `JournalEntry` without a value here fails the first check.
@Suite struct JournalRecordTests {
    @Test func everyFieldRoundTripsThroughTheJournal() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000.5)
        let record = DownloadRecord(id: "0123456789abcdef", url: "https://o.test/a.bin", storage: .persistent,
                                    lifecycle: DownloadLifecycle(restoring: .paused), now: now, tau: 3, progressInterval: 0.1)
        record.updatedAt = now.addingTimeInterval(1)
        record.lastAccess = now.addingTimeInterval(2)
        record.validator = Validator(etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT")
        record.expectedTotal = 1000
        record.keptBytes = 600
        record.durableOffset = 500
        record.expectedSHA256 = String(repeating: "ab", count: 32)
        record.expectedSize = 1000
        record.fileName = "a.bin"
        record.publishing = PublishIntent(path: "/data/0123456789abcdef-a.bin", sha256: String(repeating: "cd", count: 32), size: 1000)
        record.error = DownloadFailure(code: .httpError, message: "the origin answered HTTP 503", httpStatus: 503)
        record.tokens = ["11111111111111111111111111111111", "22222222222222222222222222222222"]
        let entry = record.journalEntry()

        for child in Mirror(reflecting: entry).children {
            let value = Mirror(reflecting: child.value)
            #expect(!(value.displayStyle == .optional && value.children.isEmpty), "\(child.label ?? "?") is not covered")
        }
        #expect(entry.verifiedOffset == 500, "only durable bytes are journaled")

        let directory = EngineFixture.root().path
        let journal = StateJournal(directory: directory)
        try journal.write(try #require(StateJournal.encode([entry])))
        #expect(journal.load() == .loaded([entry]))
        var st = stat()
        #expect(stat(journal.path, &st) == 0 && st.st_mode & 0o777 == 0o600, "the journal holds tokens: mode 0600")

        // The fast loader (JSONSerialization, mapped by hand) agrees with the Codable one.
        let data = try #require(StateJournal.encode([entry]))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        #expect(StateJournal.decodeFast(data) == (try decoder.decode(StateJournal.Document.self, from: data)).downloads)
        #expect(StateJournal.decodeFast(data) == [entry])

        let restored = DownloadRecord(entry: entry, tau: 3, progressInterval: 0.1)
        #expect(restored.journalEntry() == entry)
        #expect(restored.id == record.id && restored.url == record.url && restored.storage == .persistent)
        #expect(restored.state == .paused)
        #expect(restored.validator == record.validator)
        #expect(restored.createdAt == now && restored.updatedAt == record.updatedAt && restored.lastAccess == record.lastAccess)
        #expect(restored.keptBytes == 500 && restored.durableOffset == 500 && restored.bytesWritten == 500)
        #expect(restored.expectedTotal == 1000 && restored.expectedSize == 1000 && restored.expectedSHA256 == record.expectedSHA256)
        #expect(restored.fileName == "a.bin" && restored.error == record.error && restored.tokens == record.tokens)
        #expect(restored.finalPath == record.publishing?.path && restored.sha256 == record.publishing?.sha256)
        #expect(restored.size == 1000)
    }

    @Test func aJournalWithoutTokensStillLoads() throws {
        let json = #"{"version":1,"downloads":[{"id":"0123456789abcdef","url":"https://o.test/x","storage":"cache","state":"paused","verifiedOffset":0,"createdAt":1,"updatedAt":2,"lastAccess":3}]}"#
        let directory = EngineFixture.root().path
        try Data(json.utf8).write(to: URL(fileURLWithPath: directory + "/journal.json"))
        guard case .loaded(let entries) = StateJournal(directory: directory).load() else {
            Issue.record("not loaded")
            return
        }
        #expect(entries.count == 1 && entries[0].tokens == nil && entries[0].state == .paused)
        #expect(StateJournal.decodeFast(Data(json.utf8)) == entries)
        // A shape the fast path does not know still loads through Codable.
        #expect(StateJournal.decodeFast(Data(json.replacingOccurrences(of: "\"verifiedOffset\":0", with: "\"verifiedOffset\":0.0").utf8)) != nil)
    }
}
