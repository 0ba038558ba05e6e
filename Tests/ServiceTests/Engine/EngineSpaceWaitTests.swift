import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A download that runs out of disk space waits for space (`SpaceWait`, `diskFullWait`): its bytes
/// kept, `reason: disk_full` while it waits, the origin not asked again until the partial's file
/// system has room; then it resumes from the kept bytes. Manual clock, free space set by hand.
@Suite struct EngineSpaceWaitTests {
    struct Setup {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver()
        let monitor = ManualPressureMonitor()
        let root = EngineFixture.root()
        let engine: DownloadEngine
        let body = EngineFixture.body(3 << 20)
        let kept = 2 << 20

        init(waiting seconds: Double) throws {
            var c = EngineFixture.configuration(root)
            c.retryMaxDelay = 30
            c.diskFullWait = seconds
            engine = try DownloadEngine(configuration: c, driver: driver, scheduler: clock, diskPressure: .disabled,
                                        pressure: monitor)
        }

        /// The first attempt writes `kept` bytes, then the disk is full (`free` bytes left).
        func runOutOfSpace(free: Int64) async throws -> String {
            let id = try engine.request(DownloadRequest(url: "http://o.test/f")).snapshot.id
            try await withTimeout(10) { await driver.waitForStarts(1) }
            #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Content-Length": "\(body.count)"]))
            try driver.transfer(0).send(Array(body[..<kept]))
            monitor.setSpace(root.path, free: free)
            driver.transfer(0).fail(.disk, "write: No space left on device (errno 28)", code: ENOSPC)
            try await withTimeout(10) { await clock.waitForTimer(dueIn: SpaceWait.interval) }
            return id
        }

        /// Moves the clock to the next look at the free space, and waits for it to end as still full.
        func lookAgainStillFull() async throws {
            clock.advance(SpaceWait.interval)
            try await withTimeout(10) { await clock.waitForTimer(dueIn: SpaceWait.interval) }
        }
    }

    @Test func aFullDiskWaitsForSpaceWithoutAskingTheOriginThenResumesFromTheKeptBytes() async throws {
        let s = try Setup(waiting: 60)
        // Less free than the 1 MiB left of the file.
        let id = try await s.runOutOfSpace(free: 512 << 10)
        let waiting = try #require(s.engine.snapshot(id: id))
        #expect(waiting.state == .downloading && waiting.reason == "disk_full" && waiting.bytesWritten == Int64(s.kept))
        try await s.lookAgainStillFull()
        try await s.lookAgainStillFull()
        #expect(s.driver.startCount == 1, "the origin is not asked while the disk is full")
        #expect(s.engine.snapshot(id: id)?.reason == "disk_full")

        s.monitor.setSpace(s.root.path, free: 1 << 30)
        s.clock.advance(SpaceWait.interval)
        try await withTimeout(10) { await s.driver.waitForStarts(2) }
        let resume = s.driver.transfer(1)
        #expect(resume.header("Range") == "bytes=\(s.kept)-" && resume.header("If-Range") == "\"v1\"")
        #expect(resume.respond(206, ["ETag": "\"v1\"", "Content-Range": "bytes \(s.kept)-\(s.body.count - 1)/\(s.body.count)",
                                     "Content-Length": "\(s.body.count - s.kept)"]))
        #expect(s.engine.snapshot(id: id)?.reason == nil, "writing again: no longer waiting")
        try resume.send(Array(s.body[s.kept...]))
        resume.finish()
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(s.engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed && done.reason == nil)
        #expect(FileManager.default.contents(atPath: try #require(done.path)) == Data(s.body))
        await s.engine.shutdown()
    }

    @Test func aDiskThatStaysFullFailsDiskFullAfterTheWaitKeepingTheBytes() async throws {
        let s = try Setup(waiting: 10)  // Two looks, 5 s apart.
        let id = try await s.runOutOfSpace(free: 0)
        try await s.lookAgainStillFull()
        s.clock.advance(SpaceWait.interval)
        let failed = try await withTimeout(10) { try await EngineFixture.waitFor(s.engine, id: id, [.failed]) }
        #expect(failed.error?.code == .diskFull && failed.reason == nil)
        #expect(failed.error?.message.contains("not enough was freed while the download waited") == true, "\(String(describing: failed.error))")
        #expect(s.driver.startCount == 1)
        // The bytes stay for a resume once a caller asks again.
        #expect(failed.bytesWritten == Int64(s.kept) && failed.resumable)
        await s.engine.shutdown()
    }

    /// A service running as root writes into the blocks ext4 reserves for root: space freed there
    /// is room for it, though unprivileged users see none (`DiskSpace.reservedForUs`).
    @Test func roomOnlyInTheBlocksReservedForUsIsRoomToGoOn() async throws {
        let s = try Setup(waiting: 60)
        _ = try await s.runOutOfSpace(free: 0)
        s.monitor.setSpace(s.root.path, free: 0, reservedForUs: 1 << 30)
        s.clock.advance(SpaceWait.interval)
        try await withTimeout(10) { await s.driver.waitForStarts(2) }
        #expect(s.driver.transfer(1).header("Range") == "bytes=\(s.kept)-")
        await s.engine.shutdown()
    }
}
