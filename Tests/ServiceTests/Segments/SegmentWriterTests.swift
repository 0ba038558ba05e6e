import Basics
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

    /// A write failed, then the connection was cut before the fetch's next flush: the disk's
    /// failure is the fetch's outcome, not a cut to retry from where the piece stood (before, the
    /// piece was fetched again, into the same failing disk). The download fails with the disk.
    @Test func aFailedWriteOutweighsACutThatFollowsIt() async throws {
        let body = EngineFixture.body(4 * Self.piece)
        let tried = OriginLock(false)
        let driver = FakeTransferDriver()
        let (engine, id) = try await Self.started(driver) { _, _, _, _ in
            tried.withLock { $0 = true }
            errno = EIO
            return -1
        }
        let sent = Self.sends(driver.transfer(1), Array(body[Self.piece..<(Self.piece + (1 << 20))]))
        #expect(sent.returned && !sent.threw)
        #expect(await eventually(within: 5) { tried.withLock { $0 } }, "the write was never tried")
        driver.transfer(1).fail(.connection, "cut after the failed write")
        let ended = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: id, [.failed]) }
        #expect(ended.error?.code == .diskError, "\(String(describing: ended.error))")
        #expect(driver.startCount == 4, "the piece was fetched again")
        await engine.shutdown()
    }

    struct Ending: CustomTestStringConvertible, Sendable {
        let name: String
        let result: Result<TransferSummary, TransferFailure>
        let kind: TransferFailure.Kind
        var testDescription: String { name }
    }

    static let summary = TransferSummary(head: ResponseHead(status: 206, headers: [:], effectiveURL: "http://o/f"), bodyBytes: 1)
    static let endings: [Ending] = [
        Ending(name: "a whole answer whose write failed", result: .success(summary), kind: .disk),
        Ending(name: "a cut after a failed write", result: .failure(TransferFailure(.connection, "cut")), kind: .disk),
        Ending(name: "a stall after a failed write", result: .failure(TransferFailure(.stalled, "stalled")), kind: .disk),
        Ending(name: "a cancel stays a cancel", result: .failure(TransferFailure(.cancelled, "cancelled")), kind: .cancelled),
    ]

    @Test(arguments: endings)
    func aWriteFailureDecidesTheEnd(_ e: Ending) {
        let ended = SegmentFetch.ended(e.result, writeFailure: SystemError(errno: ENOSPC, function: "pwrite"))
        guard case .failure(let failure) = ended else { Issue.record("ended well"); return }
        #expect(failure.kind == e.kind)
    }
}
