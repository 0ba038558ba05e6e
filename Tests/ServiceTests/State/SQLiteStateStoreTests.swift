import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// The SQLite store on its own: what a commit writes is what a reopened database loads, tokens
/// included (as hashes), and a commit changes only what its batch names.
@Suite struct SQLiteStateStoreTests {
    /// Pins the store's row to `DownloadRecord`: every stored field survives a commit, a reopen and
    /// a restore. A field added to `StoredDownload` without a value here fails the first check.
    @Test func everyFieldRoundTripsThroughTheStore() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000.5)
        let record = DownloadRecord(id: "0123456789abcdef", url: "https://o.test/ü/a b?c=\"d\"&e=\\", storage: .persistent,
                                    lifecycle: DownloadLifecycle(restoring: .paused), now: now, tau: 3, progressInterval: 0.1,
                                    credential: Array(repeating: 0xA5, count: 32))
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
        record.tokens = [TokenHash(token: "11111111111111111111111111111111"), TokenHash(token: "22222222222222222222222222222222")]
        record.contentType = "application/x-tar; charset=binary"
        record.generation = 3
        record.changedAt = now.addingTimeInterval(3)
        record.connectionsRequested = 4
        record.segments = [Segment(start: 0, end: 500, next: 500), Segment(start: 500, end: 1000, next: 720)]
        record.rangesOffered = true
        record.segmentsRefused = true
        record.clientGroup = "203.0.113.7"
        let entry = record.stored()

        // `fence` says how a row is written in cluster mode (`PostgresFencingTests`), it is not stored data.
        for child in Mirror(reflecting: entry).children where child.label != "fence" {
            let value = Mirror(reflecting: child.value)
            #expect(!(value.displayStyle == .optional && value.children.isEmpty), "\(child.label ?? "?") is not covered")
        }
        #expect(entry.verifiedOffset == 500, "only durable bytes are stored")

        let directory = EngineFixture.root().path
        let store = try SQLiteStateStore.open(directory: directory).store
        try store.commit(StateBatch(upserts: [entry]))
        #expect(try StateFixture.read(directory) == [entry])
        for suffix in ["", "-wal", "-shm"] {
            var st = stat()
            #expect(stat(directory + "/state.db" + suffix, &st) == 0 && st.st_mode & 0o777 == 0o600, "state.db\(suffix) is not 0600")
        }

        let restored = DownloadRecord(stored: entry, tau: 3, progressInterval: 0.1)
        #expect(restored.stored() == entry)
        #expect(restored.id == record.id && restored.url == record.url && restored.storage == .persistent)
        #expect(restored.state == .paused)
        #expect(restored.validator == record.validator)
        #expect(restored.createdAt == now && restored.updatedAt == record.updatedAt && restored.lastAccess == record.lastAccess)
        #expect(restored.keptBytes == 500 && restored.durableOffset == 500 && restored.bytesWritten == 500)
        #expect(restored.expectedTotal == 1000 && restored.expectedSize == 1000 && restored.expectedSHA256 == record.expectedSHA256)
        #expect(restored.fileName == "a.bin" && restored.error == record.error && restored.tokens == record.tokens)
        #expect(restored.finalPath == record.publishing?.path && restored.sha256 == record.publishing?.sha256)
        #expect(restored.size == 1000)
        #expect(restored.contentType == record.contentType && restored.generation == 3 && restored.changedAt == record.changedAt)
        #expect(restored.key == record.key && restored.isCredentialed && restored.credentials == nil)
        #expect(restored.connectionsRequested == 4 && restored.segments == record.segments)
    }

    @Test func aCommitChangesOnlyWhatItsBatchNames() throws {
        let directory = EngineFixture.root().path
        let store = try SQLiteStateStore.open(directory: directory).store
        #expect(try store.load().isEmpty)
        var a = StateFixture.download("a", .completed)
        a.tokens = [TokenHash(token: "t1"), TokenHash(token: "t2")]
        let b = StateFixture.download("b", .paused)
        let c = StateFixture.download("c", .failed)
        try store.commit(StateBatch(upserts: [a, b, c]))
        // A caller leaves a, another joins; b is forgotten; d is new.
        a.tokens = [TokenHash(token: "t2"), TokenHash(token: "t3")]
        a.state = .completed
        let d = StateFixture.download("d", .queued)
        try store.commit(StateBatch(upserts: [a, d], deletions: ["b", "never-stored"]))
        #expect(try StateFixture.read(directory) == [a, c, d], "in the order they were first stored")
        // A fresh connection that commits before loading finds the rows of the ids it is given.
        let other = try SQLiteStateStore.open(directory: directory).store
        a.state = .failed
        try other.commit(StateBatch(upserts: [a]))
        #expect(try StateFixture.read(directory) == [a, c, d])
        try other.commit(StateBatch(deletions: ["a", "c", "d"]))
        #expect(try StateFixture.read(directory).isEmpty)
    }

    /// One id is one row: twice in a batch, it is written once; rows an earlier release left with
    /// an id a lower row holds (start-up keeps the first) go at the next commit, which writes the
    /// first row, the one start-up reads.
    @Test func oneIDIsOneRow() throws {
        let directory = EngineFixture.root().path
        let store = try SQLiteStateStore.open(directory: directory).store
        var a = StateFixture.download("a", .paused)
        var later = a
        later.state = .failed
        try store.commit(StateBatch(upserts: [a, later, StateFixture.download("b", .queued)]))
        #expect(try StateFixture.read(directory).map(\.id) == ["a", "b"])
        #expect(try StateFixture.read(directory).first?.state == .failed)

        let raw = try SQLiteConnection(path: directory + "/" + SQLiteStateStore.fileName)
        try raw.execute("CREATE TEMP TABLE copy AS SELECT * FROM downloads WHERE id = 'a'; "
                        + "UPDATE copy SET row = row + 100, url = 'http://o.test/stale'; INSERT INTO downloads SELECT * FROM copy")
        raw.close()
        #expect(try StateFixture.read(directory).map(\.id) == ["a", "b", "a"])
        let reopened = try SQLiteStateStore.open(directory: directory).store
        _ = try reopened.load()
        a.state = .completed
        try reopened.commit(StateBatch(upserts: [a]))
        let rows = try StateFixture.read(directory)
        #expect(rows.map(\.id) == ["a", "b"] && rows.first?.state == .completed && rows.first?.url == a.url)
    }

    @Test func unknownFailureCodesAndOddTextAreKeptAsTheyWere() throws {
        let directory = EngineFixture.root().path
        var entry = StateFixture.download("q", .failed, url: "http://o.test/\u{0}x\u{1F}'\"")
        entry.error = DownloadFailure(journalCode: "quota_exceeded", message: "", httpStatus: nil)
        entry.fileName = "; DROP TABLE downloads; --"
        try StateFixture.write([entry], to: directory)
        let loaded = try #require(try StateFixture.read(directory).first)
        #expect(loaded == entry && loaded.error?.code == .unknown && loaded.error?.journalCode == "quota_exceeded")
    }

    @Test func tokenHashesAreTheSHA256OfTheToken() {
        let hash = TokenHash(token: "abc")
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        #expect(hash.digest.map { String(format: "%02x", $0) }.joined()
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(TokenHash(digest: hash.digest) == hash && TokenHash(digest: [1, 2, 3]) == nil)
        #expect(TokenHash(token: "abd") != hash)
    }
}
