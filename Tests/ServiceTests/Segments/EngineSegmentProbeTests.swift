import Foundation
import Testing
@testable import DownloaderEngine

/// Segmented fetch with its probe (`ConnectionProbe`): a download starts on one connection, which
/// runs on through the pieces nobody has; a probe opens after the window, on the last piece.
@Suite struct EngineSegmentProbeTests {
    let body = EngineFixture.body(40_000)

    /// The window never ends during the fetch: one request, no ranged one, the whole file verified
    /// (the first connection took every piece over as it reached it).
    @Test func aloneTheFirstConnectionRunsThroughEveryPiece() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"", chunk: 700)
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try EngineSegmentTests.engine(driver, minimum: 1000, probe: 3600)
        let (id, events) = try await EngineSegmentTests.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(driver.startCount == 1)
        #expect(driver.transfer(0).range == nil)
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try EngineSegmentTests.completedBytes(engine, id) == Data(body))
        #expect(done.connections == ConnectionCounts(requested: 4, granted: 4, active: 0))
        #expect(done.bytesWritten == 40_000)
    }

    /// A window shorter than a chunk: the probe opens at once, on the last piece (so that the first
    /// connection runs on undisturbed); whatever it decides, every piece is fetched once, under
    /// If-Range, and the file verifies.
    @Test func theProbeTakesTheLastPieceAndTheFileVerifies() async throws {
        let origin = RangedFakeOrigin(body: body, etag: "\"v1\"", chunk: 500)
        let driver = FakeTransferDriver { request, _ in origin.script(request) }
        let engine = try EngineSegmentTests.engine(driver, minimum: 1000, probe: 1e-9)
        let (id, events) = try await EngineSegmentTests.fetch(engine, connections: 4)
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(driver.startCount >= 2)
        #expect(driver.transfer(1).range == "bytes=39000-39999")
        #expect((1..<driver.startCount).allSatisfy { driver.transfer($0).header("If-Range") == "\"v1\"" })
        let ranges = (1..<driver.startCount).compactMap { driver.transfer($0).range }
        #expect(Set(ranges).count == ranges.count)  // No piece asked for twice.
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(try EngineSegmentTests.completedBytes(engine, id) == Data(body))
        #expect(done.bytesWritten == 40_000)
    }
}
