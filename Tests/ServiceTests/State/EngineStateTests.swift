import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// What the engine commits: only the downloads that changed, and caller tokens only as hashes.
@Suite struct EngineStateTests {
    @Test func tokensAreNeverStoredInClear() async throws {
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let first = try engine.request(DownloadRequest(url: "http://o.test/secret-a"))
        let joined = try engine.request(DownloadRequest(url: "http://o.test/secret-a"))
        let other = try engine.request(DownloadRequest(url: "http://o.test/secret-b"))
        let tokens = [first.token, joined.token, other.token]
        let stored = try StateFixture.stored(engine)
        #expect(stored.first { $0.id == first.snapshot.id }?.tokens == [TokenHash(token: first.token), TokenHash(token: joined.token)])
        let state = root.appendingPathComponent("state").path
        let bytes = StateFixture.fileBytes(state)
        #expect(bytes.contains(bytes: Array("http://o.test/secret-b".utf8)), "the search finds what is stored")
        for token in tokens {
            #expect(!bytes.contains(bytes: Array(token.utf8)) && !bytes.contains(bytes: Array(token.uppercased().utf8)),
                    "a token is stored in clear")
            #expect(bytes.contains(bytes: TokenHash(token: token).digest), "its hash is stored")
        }
        await engine.shutdown()
        // After a restart the hashes still find the callers.
        let next = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(next.liveTokens(among: tokens + ["ffffffffffffffffffffffffffffffff"]) == Set(tokens))
        #expect(next.cancel(token: joined.token)?.callers == 1)
        await next.shutdown()
    }

    /// A signature named in `coalesceIgnoreQuery` is a credential: a removal's tombstone keeps the
    /// URL as shown, not the signature.
    @Test func aTombstoneStoresTheURLAsShown() async throws {
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver()) { $0.coalesceIgnoreQuery = ["X-Amz-Signature"] }
        let made = try engine.request(DownloadRequest(url: "http://o.test/obj?v=1&X-Amz-Signature=SIG0123"))
        #expect(engine.remove(id: made.snapshot.id) != nil)
        await engine.shutdown()
        let state = root.appendingPathComponent("state").path
        let tombstones = try SQLiteStateStore.open(directory: state).store.loadTombstones()
        #expect(tombstones.map(\.url) == ["http://o.test/obj?v=1&X-Amz-Signature=REDACTED"])
        #expect(!StateFixture.fileBytes(state).contains(bytes: Array("SIG0123".utf8)))
    }

    @Test func onlyTheDownloadsThatChangedAreCommitted() async throws {
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let batches = Mutex<[StateBatch]>([])
        let source = try #require(engine.core.stateWriter.source)
        engine.core.stateWriter.source = { retry in
            let batch = source(retry)
            if !batch.isEmpty { batches.withLock { $0.append(batch) } }
            return batch
        }
        let made = try (0..<20).map { try engine.request(DownloadRequest(url: "http://o.test/f\($0)")) }
        engine.core.stateWriter.flush()
        #expect(Set(batches.withLock { $0.flatMap(\.upserts).map(\.id) }) == Set(made.map(\.snapshot.id)))
        batches.withLock { $0 = [] }

        let joined = try engine.request(DownloadRequest(url: "http://o.test/f7"))
        engine.core.stateWriter.flush()
        let record = try #require(engine.core.locked { engine.core.byID[joined.snapshot.id]?.stored() })
        #expect(batches.withLock { $0 } == [StateBatch(upserts: [record])])
        batches.withLock { $0 = [] }

        let gone = made[3].snapshot.id
        engine.core.decide { engine.core.byID[gone].map(engine.core.forget) }
        engine.core.stateWriter.flush()
        #expect(batches.withLock { $0 } == [StateBatch(deletions: [gone])])
        #expect(try StateFixture.read(root.appendingPathComponent("state").path).count == 19)
        await engine.shutdown()
    }

    /// What `/fetch` names a body by outlives a restart: the origin's content type and the body's
    /// version (its ETag when the origin gave none), so a client's `If-Range` still matches.
    @Test func contentTypeAndBodyVersionSurviveARestart() async throws {
        let root = EngineFixture.root()
        let body = EngineFixture.body(3000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Type": "text/csv"], body: body) }
        let engine = try EngineFixture.engine(root, driver: driver)
        let url = "http://o.test/table.csv"
        _ = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: url), until: [.completed])
        let before = try #require(engine.peek(DownloadRequest(url: url))?.state)
        #expect(before.contentType == "text/csv" && before.generation == 1)
        await engine.shutdown()
        let next = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let after = try #require(next.peek(DownloadRequest(url: url))?.state)
        #expect(after.contentType == "text/csv" && after.generation == before.generation && after.phase == .completed)
        await next.shutdown()
    }

    /// After a shutdown the WAL is folded into `state.db`: a copy of that one file holds everything.
    @Test func aShutdownLeavesOneSelfContainedFile() async throws {
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let made = try (0..<5).map { try engine.request(DownloadRequest(url: "http://o.test/s\($0)")) }
        engine.core.stateWriter.flush()
        let state = root.appendingPathComponent("state").path
        #expect((FileStore.fileSize(state + "/state.db-wal") ?? 0) > 0, "committed into the WAL first")
        await engine.shutdown()
        #expect(FileStore.fileSize(state + "/state.db-wal") == 0)
        let copy = EngineFixture.root().path
        try FileManager.default.copyItem(atPath: state + "/state.db", toPath: copy + "/state.db")
        #expect(Set(try StateFixture.read(copy).map(\.id)) == Set(made.map(\.snapshot.id)))
    }
}
