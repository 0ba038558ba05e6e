import Dispatch
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A segmented attempt's pieces are written on the crew's writer queue: a write the device takes
/// its time over (direct writes wait for it) never holds the transfer thread, which every
/// download's connections share; a failed write still ends its fetch.
@Suite struct SegmentWriterTests {
    static let piece = 2 << 20

    /// Four pieces of 2 MiB, every fetch answered; `write` stands in for the pieces' pwrite(2).
    static func started(_ driver: FakeTransferDriver, write: @escaping InPlaceWrites.PositionedWrite) async throws
        -> (DownloadEngine, String) {
        let engine = try EngineSegmentCheckpointTests.engine(driver, piece: Int64(piece), checkpoint: 1 << 40)
        engine.core.locked { engine.core.hooks.pieceWrite = write }
        let id = try await EngineSegmentCheckpointTests.started(engine, driver, size: 4 * piece)
        return (engine, id)
    }

    static func crew(_ driver: FakeTransferDriver) -> SegmentCrew? {
        (driver.transfer(0).delegate as? Attempt)?.crew
    }

    /// `send` on another thread: true when it returned within 5 s.
    static func sends(_ transfer: FakeTransfer, _ bytes: [UInt8]) -> (returned: Bool, threw: Bool) {
        let done = DispatchSemaphore(value: 0)
        let threw = OriginLock(false)
        DispatchQueue.global().async {
            do { try transfer.send(bytes) } catch { threw.withLock { $0 = true } }
            done.signal()
        }
        let returned = done.wait(timeout: .now() + 5) == .success
        return (returned, threw.withLock { $0 })
    }

    /// The first piece write is held: the fetch's transfer goes on receiving (a buffer written,
    /// one gathering), and the bytes count once the write ended. Before, the transfer thread waited
    /// in the write.
    @Test func aHeldPieceWriteDoesNotHoldTheTransfer() async throws {
        let body = EngineFixture.body(4 * Self.piece)
        let release = DispatchSemaphore(value: 0)
        let held = OriginLock(false)
        let driver = FakeTransferDriver()
        let (engine, id) = try await Self.started(driver) { fd, base, count, at in
            if !held.withLock({ was in defer { was = true }; return was }) { release.wait() }
            return Glibc.pwrite(fd, base, count, at)
        }
        let mib = 1 << 20
        let first = Self.sends(driver.transfer(1), Array(body[Self.piece..<(Self.piece + mib + 1000)]))
        #expect(first.returned, "the transfer thread waited for the held write")
        #expect(await eventually(within: 5) { held.withLock { $0 } }, "the write was never begun")
        let before = engine.core.locked { engine.core.byID[id]?.bytesWritten } ?? -1
        #expect(before < Int64(Self.piece + mib), "bytes counted before their write ended: \(before)")
        release.signal()
        try driver.transfer(1).send(Array(body[(Self.piece + mib + 1000)..<(2 * Self.piece)]))
        driver.transfer(1).finish()
        let counted = await eventually(within: 5) { Self.crew(driver)?.table[1].next == Int64(2 * Self.piece) }
        #expect(counted, "the piece's bytes were never counted")
        await engine.shutdown()
    }

    /// Every piece write fails (EIO): the fetch's next flush throws, so its transfer ends, and the
    /// piece is counted as far as it was written (nothing).
    @Test func aFailedPieceWriteEndsItsFetchAtItsNextFlush() async throws {
        let body = EngineFixture.body(4 * Self.piece)
        let driver = FakeTransferDriver()
        let (engine, id) = try await Self.started(driver) { _, _, _, _ in
            errno = EIO
            return -1
        }
        let mib = 1 << 20
        let first = Self.sends(driver.transfer(1), Array(body[Self.piece..<(Self.piece + mib)]))
        #expect(first.returned && !first.threw)
        let second = Self.sends(driver.transfer(1), Array(body[(Self.piece + mib)..<(2 * Self.piece)]))
        #expect(second.returned && second.threw, "the failed write went unnoticed")
        #expect(Self.crew(driver)?.table[1].next == Int64(Self.piece), "bytes counted that were never written")
        #expect(engine.core.locked { engine.core.byID[id]?.bytesWritten } == 0)
        await engine.shutdown()
    }
}
