import Foundation
import Testing
@testable import DownloaderEngine

/// What a segmented attempt's checkpoints store while it runs: a crash at any moment fetches again
/// at most what was written since the last checkpoint, the prefix's bytes included.
@Suite struct EngineSegmentCheckpointTests {
    /// Pieces of `piece` bytes; the pieces' writes are checkpointed every `checkpoint` bytes.
    static func engine(_ driver: FakeTransferDriver, piece: Int64, checkpoint: Int64) throws -> DownloadEngine {
        try EngineFixture.engine(EngineFixture.root(), driver: driver) {
            $0.maxConnectionsPerDownload = 4
            $0.minimumSegmentBytes = piece
            $0.segmentProbeSeconds = 0
            $0.checkpointBytes = checkpoint
            $0.checkpointInterval = 3600
        }
    }

    /// Starts a download of `size` bytes on 4 connections; every piece after the prefix is answered.
    static func started(_ engine: DownloadEngine, _ driver: FakeTransferDriver, size: Int) async throws -> String {
        let r = try engine.request(DownloadRequest(url: EngineSegmentTests.url, connections: 4))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Length": "\(size)"]))
        try await withTimeout(20) { await driver.waitForStarts(4) }
        let piece = size / 4
        for i in 1..<4 { #expect(respond206(driver.transfer(i), i * piece, i * piece + piece - 1, of: size)) }
        return r.snapshot.id
    }

    static func respond206(_ t: FakeTransfer, _ first: Int, _ last: Int, of size: Int) -> Bool {
        t.respond(206, ["Content-Range": "bytes \(first)-\(last)/\(size)", "ETag": "\"v1\"", "Content-Length": "\(last - first + 1)"])
    }

    /// What `engine` has stored of its one download once `condition` holds (or 5 s passed).
    static func stored(_ engine: DownloadEngine, when condition: @escaping (StoredDownload) -> Bool) async -> StoredDownload? {
        var stored: StoredDownload?
        _ = await eventually(within: 5) {
            stored = try? StateFixture.stored(engine).first
            return stored.map(condition) ?? false
        }
        return stored
    }

    /// The prefix stops at its piece's end between two of its own checkpoints (its 10 000 bytes are
    /// fewer than the checkpoint's 15 000, and the interval is an hour): it writes no more, so its
    /// last bytes are checkpointed at once. Before, they stayed in its buffer, unsynced, until the
    /// attempt settled: after a SIGKILL the whole prefix was fetched again.
    @Test func thePrefixStoppedAtItsEndIsCheckpointedAtOnce() async throws {
        let body = EngineFixture.body(40_000)
        let driver = FakeTransferDriver()
        let engine = try Self.engine(driver, piece: 10_000, checkpoint: 15_000)
        _ = try await Self.started(engine, driver, size: body.count)
        try driver.transfer(0).send(Array(body[0..<4_000]))
        #expect(throws: SegmentStop.self) { try driver.transfer(0).send(Array(body[4_000..<10_000])) }
        driver.transfer(0).fail(.disk, "stopped at the prefix's end")
        let stored = await Self.stored(engine) { $0.verifiedOffset == 10_000 }
        #expect(stored?.verifiedOffset == 10_000)
        await engine.shutdown()
    }

    /// The prefix's transfer is cut 1 000 bytes into its piece and a fetch takes the rest of the piece
    /// over, written in place: once hashed into the partial it is the file's front, and the next
    /// checkpoint of the pieces stores it durable (it is in the file when that sync begins). Before,
    /// the stored offset stayed where the prefix's own transfer had left it (0).
    @Test func aPrefixTakenOverByAFetchIsStoredByTheNextCheckpointOfThePieces() async throws {
        let piece = 1 << 20  // `CrewHashing.step`: the hashing goes on once a piece more is contiguous
        let body = EngineFixture.body(4 * piece)
        let driver = FakeTransferDriver()
        let engine = try Self.engine(driver, piece: Int64(piece), checkpoint: Int64(5 * piece / 2))
        let id = try await Self.started(engine, driver, size: body.count)
        try driver.transfer(0).send(Array(body[0..<1_000]))
        driver.transfer(0).fail(.connection, "cut")
        try await withTimeout(20) { await driver.waitForStarts(5) }
        let takeover = driver.transfer(4)
        #expect(takeover.range == "bytes=1000-\(piece - 1)")
        #expect(Self.respond206(takeover, 1_000, piece - 1, of: body.count))
        try takeover.send(Array(body[1_000..<piece]))
        try driver.transfer(1).send(Array(body[piece..<(2 * piece)]))
        let hashed = await eventually(within: 5) { engine.core.locked { engine.core.byID[id]?.flushedBytes } == Int64(2 * piece) }
        #expect(hashed, "the pieces were never hashed into the partial")
        try driver.transfer(2).send(Array(body[(2 * piece)..<(3 * piece)]))  // 3 pieces in place: a checkpoint
        let stored = await Self.stored(engine) { $0.segments?[2].next == Int64(3 * piece) }
        #expect(stored?.segments?.map(\.next) == [1, 2, 3, 3].map { Int64(piece * $0) }, "\(String(describing: stored?.segments))")
        #expect((stored?.verifiedOffset ?? 0) >= Int64(2 * piece), "\(String(describing: stored?.verifiedOffset))")
        await engine.shutdown()
    }
}
