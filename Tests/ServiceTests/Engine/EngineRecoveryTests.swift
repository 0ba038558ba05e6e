import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

@Suite struct EngineRecoveryTests {
    @Test func crashTailBeyondTheStoredOffsetIsCutOff() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver()
        let first = try EngineFixture.engine(root, driver: driver)
        let r = try await EngineFixture.partial(first, driver: driver, url: "http://o.test/f",
                                                headers: ["Content-Length": "100000", "ETag": "\"e\""],
                                                sending: EngineFixture.body(30_000))
        await first.shutdown()
        // A crash after more (unstored) bytes reached the file: garbage past the offset.
        let partial = root.appendingPathComponent("state/partials/\(r.snapshot.id).part").path
        let handle = try #require(FileHandle(forWritingAtPath: partial))
        handle.seekToEndOfFile()
        handle.write(Data(repeating: 0xEE, count: 5000))
        try handle.close()
        #expect(FileStore.fileSize(partial) == 35_000)

        let second = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let restored = try #require(second.snapshot(id: r.snapshot.id))
        #expect(restored.state == .paused && restored.bytesWritten == 30_000 && restored.resumable)
        #expect(FileStore.fileSize(partial) == 30_000)
        #expect(second.recovery.loaded == 1)
    }

    @Test func completedDownloadWhoseFileVanishedIsDropped() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: [:], body: [1, 2, 3]) }
        let first = try EngineFixture.engine(root, driver: driver)
        let (r, done) = try await EngineFixture.requestAndWait(first, DownloadRequest(url: "http://o.test/f"),
                                                               until: [.completed])
        let (keep, _) = try await EngineFixture.requestAndWait(first, DownloadRequest(url: "http://o.test/g"),
                                                               until: [.completed])
        await first.shutdown()
        try FileManager.default.removeItem(atPath: try #require(done.path))
        let second = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(second.snapshot(id: r.snapshot.id) == nil)
        #expect(second.completedFile(id: keep.snapshot.id)?.size == 3)
        #expect(second.recovery.dropped == 1)
        // Tokens survive a restart, like their downloads.
        #expect(second.cancel(token: keep.token)?.id == keep.snapshot.id)
    }

    @Test func orphanCacheFilesAreSweptOnStart() throws {
        let root = EngineFixture.root()
        _ = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let cache = root.appendingPathComponent("cache")
        try Data([1]).write(to: cache.appendingPathComponent("0123456789abcdef-left.bin"))
        try Data([2]).write(to: cache.appendingPathComponent("notours.txt"))
        _ = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path) == ["notours.txt"])
    }

    /// A failed download nobody holds any more starts afresh under the restarting request's expectations.
    @Test func failedDownloadTakesTheRestartingRequestsExpectations() async throws {
        let body: [UInt8] = [1, 2, 3]
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: [:], body: body) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (wrong, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f", sha256: String(repeating: "0", count: 64)),
                                                                     until: [.failed, .completed])
        #expect(failed.error?.code == .checksumMismatch)
        #expect(engine.cancel(token: wrong.token) != nil)
        let right = try engine.request(DownloadRequest(url: "http://o.test/f", sha256: SHA256Hasher.hex(body)))
        #expect(right.snapshot.id == wrong.snapshot.id)
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: right.snapshot.id, [.completed, .failed]) }
        #expect(done.state == .completed)
    }

    /// While callers hold a failed download, a restart under other expectations (another sha256, or
    /// none) never completes it for them unverified: the newcomer gets a download of its own, the
    /// failed one keeps its callers and its verdict. The same expectations restart it in place.
    @Test(arguments: [String?.none, SHA256Hasher.hex([1, 2, 3])])
    func aFailedDownloadsCallersKeepTheirVerdictWhenOthersAskDifferently(newcomerSHA: String?) async throws {
        let body: [UInt8] = [1, 2, 3]
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: [:], body: body) }
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: driver)
        let expected = String(repeating: "0", count: 64)
        let (holder, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f", sha256: expected),
                                                                      until: [.failed, .completed])
        #expect(failed.error?.code == .checksumMismatch)
        let newcomer = try engine.request(DownloadRequest(url: "http://o.test/f", sha256: newcomerSHA))
        #expect(newcomer.snapshot.id != holder.snapshot.id)
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: newcomer.snapshot.id, [.completed, .failed]) }
        #expect(done.state == .completed && done.callers == 1)
        let kept = try #require(engine.snapshot(id: holder.snapshot.id))
        #expect(kept.state == .failed && kept.error?.code == .checksumMismatch && kept.callers == 1)
        // Later callers join the new download, also after a restart (both are kept).
        #expect(try engine.request(DownloadRequest(url: "http://o.test/f")).snapshot.id == newcomer.snapshot.id)
        await engine.shutdown()
        let restarted = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(try restarted.request(DownloadRequest(url: "http://o.test/f")).snapshot.id == newcomer.snapshot.id)
        #expect(restarted.snapshot(id: holder.snapshot.id)?.state == .failed)
        #expect(restarted.cancel(token: holder.token)?.id == holder.snapshot.id)
    }

    @Test func noSpaceMapsToDiskFull() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.diskFullWait = 0 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, [:]))
        driver.transfer(0).fail(.disk, "write failed", code: ENOSPC)
        let failed = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: r.snapshot.id, [.failed]) }
        #expect(failed.error?.code == .diskFull)
    }

    @Test func anInterruptedMoveToTheDataAreaIsRedoneOnStart() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: [:], body: [4, 5, 6]) }
        let first = try EngineFixture.engine(root, driver: driver)
        let (r, done) = try await EngineFixture.requestAndWait(first, DownloadRequest(url: "http://o.test/m"),
                                                               until: [.completed])
        await first.shutdown()
        // As if the service died after storing `persistent` but before the file moved.
        let state = root.appendingPathComponent("state").path
        var entries = try StateFixture.read(state)
        entries[0].storage = .persistent
        try StateFixture.write(entries, to: state)

        let second = try EngineFixture.engine(root, driver: FakeTransferDriver()) { _ in }
        let moved = OneShot<String>()
        second.core.locked {
            second.core.hooks.moved = { _, path in moved.set(path ?? "") }
            // The move may have finished before the hook was set.
            if let path = second.core.byID[r.snapshot.id]?.finalPath, !second.core.byID[r.snapshot.id]!.lifecycle.moving,
               path.hasPrefix(second.core.store.dataDirectory) {
                moved.set(path)
            }
        }
        let target = try await withTimeout(10) { try await moved.value() }
        #expect(target.hasPrefix(root.appendingPathComponent("data").path + "/"))
        #expect(second.completedFile(id: r.snapshot.id)?.path == target)
        // The old name goes once the new path is committed, just after the switch the hook may have seen.
        let old = try #require(done.path)
        let deadline = Date().addingTimeInterval(10)
        while FileManager.default.fileExists(atPath: old) && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!FileManager.default.fileExists(atPath: old))
        await second.shutdown()
    }

    @Test func failuresOlderThanTheRetentionAreForgottenOnStart() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver { _, _ in .init(status: 410, headers: [:], body: []) }
        let first = try EngineFixture.engine(root, driver: driver) { $0.failedRetention = 3600 }
        let (r, _) = try await EngineFixture.requestAndWait(first, DownloadRequest(url: "http://o.test/gone"), until: [.failed])
        await first.shutdown()
        let fresh = try EngineFixture.engine(root, driver: FakeTransferDriver()) { $0.failedRetention = 3600 }
        #expect(fresh.snapshot(id: r.snapshot.id)?.state == .failed)
        await fresh.shutdown()
        let later = ManualScheduler()
        later.advance(Date().timeIntervalSince1970 - 1_800_000_000 + 7200)  // Two hours after now.
        let old = try EngineFixture.engine(root, driver: FakeTransferDriver(), scheduler: later) { $0.failedRetention = 3600 }
        #expect(old.snapshot(id: r.snapshot.id) == nil)
        await old.shutdown()
    }
}
