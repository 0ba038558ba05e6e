import Foundation
import Testing
@testable import DownloaderEngine

/// The `StateStore` contract, run against both engines: SQLite (the single process) and PostgreSQL
/// (cluster mode, a real server from `PostgresServer`). What a commit writes is what a fresh store
/// loads, in first-recorded order, tokens as their hashes; a commit changes only what it names.
@Suite(.timeLimit(.minutes(2))) struct StateStoreContractTests {
    enum Engine: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case sqlite, postgres
        var testDescription: String { rawValue }

        /// SQLite always; PostgreSQL wherever it is installed (CI installs it: there it runs).
        static var available: [Engine] { PostgresServer.isInstalled ? [.sqlite, .postgres] : [.sqlite] }

        /// A place for a store: each call of the returned closure opens a new store on it (a fresh connection).
        func place() throws -> () throws -> StateStore {
            switch self {
            case .sqlite:
                let directory = EngineFixture.root().path
                return { try SQLiteStateStore.open(directory: directory).store }
            case .postgres:
                let url = try PostgresServer.shared.createDatabase()
                return { try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2)) }
            }
        }
    }

    @Test(arguments: Engine.available) func everyFieldRoundTrips(engine: Engine) async throws {
        try await blocking { check in
            let open = try engine.place()
            var entry = StateFixture.download("0123456789abcdef", .paused, url: "https://o.test/ü/a b?c=\"d\"&e=\\'{x,y}")
            entry.storage = .persistent
            entry.validator = Validator(etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT")
            entry.expectedTotal = 1000
            entry.verifiedOffset = 500
            entry.expectedSHA256 = String(repeating: "ab", count: 32)
            entry.expectedSize = 1000
            entry.fileName = "; DROP TABLE downloads; --"
            entry.finalPath = "/data/0123456789abcdef-a.bin"
            entry.sha256 = String(repeating: "cd", count: 32)
            entry.size = 1000
            entry.createdAt = Date(timeIntervalSince1970: 1_800_000_000.123456)
            entry.updatedAt = Date(timeIntervalSince1970: 1_800_000_001.1)
            entry.lastAccess = Date(timeIntervalSince1970: 1_800_000_002.7)
            entry.error = DownloadFailure(journalCode: "quota_exceeded", message: "NULL", httpStatus: 503)
            entry.contentType = "application/x-tar; charset=binary"
            entry.generation = 3
            entry.changedAt = Date(timeIntervalSince1970: 1_800_000_003.25)
            entry.credentialKey = Array(0..<32)
            entry.connections = 4
            entry.segments = [Segment(start: 0, end: 500, next: 200), Segment(start: 500, end: 1000, next: 720)]
            entry.tokens = [TokenHash(token: "11111111111111111111111111111111"), TokenHash(token: "22222222222222222222222222222222")]
            entry.held = true
            entry.rangesOffered = false
            entry.segmentsRefused = true
            entry.clientGroup = "2001:db8:1:2::/64"
            // `fence` says how a row is written (cluster mode), it is not stored data: `PostgresFencingTests`.
            for child in Mirror(reflecting: entry).children where child.label != "fence" {
                let value = Mirror(reflecting: child.value)
                check.expect(!(value.displayStyle == .optional && value.children.isEmpty), "\(child.label ?? "?") is not covered")
            }
            try open().commit(StateBatch(upserts: [entry]))
            try check.expect(open().load() == [entry])
            // Without a validator, error or optionals, too.
            let bare = StateFixture.download("b", .queued)
            try open().commit(StateBatch(upserts: [bare]))
            try check.expect(open().load() == [entry, bare])
        }
    }

    @Test(arguments: Engine.available) func aCommitChangesOnlyWhatItsBatchNames(engine: Engine) async throws {
        try await blocking { check in
            let open = try engine.place()
            let store = try open()
            try check.expect(store.load().isEmpty)
            var a = StateFixture.download("a", .completed)
            a.tokens = [TokenHash(token: "t1"), TokenHash(token: "t2")]
            let b = StateFixture.download("b", .paused)
            let c = StateFixture.download("c", .failed)
            try store.commit(StateBatch(upserts: [a, b, c]))
            a.tokens = [TokenHash(token: "t2"), TokenHash(token: "t3")]
            let d = StateFixture.download("d", .queued)
            try store.commit(StateBatch(upserts: [a, d], deletions: ["b", "never-stored"]))
            try check.expect(open().load() == [a, c, d], "in the order they were first stored")
            // A fresh store that commits before loading finds the rows of the ids it is given.
            let other = try open()
            a.state = .failed
            a.tokens = []
            try other.commit(StateBatch(upserts: [a]))
            try check.expect(open().load() == [a, c, d])
            try other.commit(StateBatch(deletions: ["a", "c", "d"]))
            try check.expect(open().load().isEmpty)
            try other.commit(StateBatch())
        }
    }

    @Test(arguments: Engine.available) func manyDownloadsAndTokensLoadBackWhole(engine: Engine) async throws {
        try await blocking { check in
            let open = try engine.place()
            var downloads: [StoredDownload] = []
            for n in 0..<300 {
                var d = StateFixture.download(String(format: "%016x", n * 7919), n % 3 == 0 ? .completed : .paused)
                d.verifiedOffset = Int64(n) * 4096
                d.tokens = Set((0..<(n % 4)).map { TokenHash(token: "token-\(n)-\($0)") })
                downloads.append(d)
            }
            try open().commit(StateBatch(upserts: downloads))
            try check.expect(open().load() == downloads)
        }
    }
}
