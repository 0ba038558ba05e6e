import Foundation
import Testing
@testable import DownloaderEngine

/// The engine's synchronous API runs on the HTTP loop thread: slow disk work must happen elsewhere.
@Suite struct EngineOffLoopTests {
    /// Runs `body` on its own thread; the value arrives when it returns (so a blocked call shows as a timeout).
    static func offThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> OneShot<T> {
        let result = OneShot<T>()
        Thread.detachNewThread { result.set(body()) }
        return result
    }

    static func stored(_ engine: DownloadEngine) throws -> [StoredDownload] {
        try StateFixture.stored(engine)
    }

    @Test func promotingACompletedFileReturnsAtOnceAndMovesItOnTheWorkQueue() async throws {
        let root = EngineFixture.root()
        let body = EngineFixture.body(40_000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "40000"], body: body) }
        let engine = try EngineFixture.engine(root, driver: driver)
        let (first, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/p.bin"),
                                                                until: [.completed])
        let cached = try #require(engine.completedFile(id: first.snapshot.id)).path

        let gate = DispatchSemaphore(value: 0)
        let moveStarted = OneShot<Bool>()
        let moved = OneShot<String>()
        engine.core.locked {
            engine.core.hooks.beforeMove = {
                moveStarted.set(true)
                _ = gate.wait(timeout: .now() + 20)
            }
            engine.core.hooks.moved = { _, path in moved.set(path ?? "") }
        }
        defer { gate.signal() }

        // The move is held: request() must still return (it used to rename/copy under the lock).
        let answer = Self.offThread { Result { () throws(EngineError) in
            try engine.request(DownloadRequest(url: "http://o.test/p.bin", storage: .persistent))
        } }
        let joined = try await withTimeout(20) { try await answer.value() }.get()
        _ = try await withTimeout(20) { try await moveStarted.value() }
        #expect(joined.snapshot.state == .completed && joined.snapshot.storage == .persistent)
        #expect(joined.snapshot.path == cached)
        // Still served, from where it was, while the move runs; other calls do not wait either.
        #expect(engine.completedFile(id: first.snapshot.id)?.path == cached)
        #expect(engine.snapshot(id: first.snapshot.id)?.state == .completed)

        gate.signal()
        let target = try await withTimeout(10) { try await moved.value() }
        #expect(target.hasPrefix(root.appendingPathComponent("data").path + "/"))
        #expect(engine.completedFile(id: first.snapshot.id)?.path == target)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data(body))
        #expect(!FileManager.default.fileExists(atPath: cached))
        let entry = try #require(try Self.stored(engine).first { $0.id == first.snapshot.id })
        #expect(entry.finalPath == target && entry.storage == .persistent)
        await engine.shutdown()
    }

    @Test func checkpointSyncRunsOffTheTransferThreadAndTheJournalNeverRunsAhead() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(root, driver: driver)
        let gate = DispatchSemaphore(value: 0)
        let syncStarted = OneShot<Bool>()
        let checkpointed = OneShot<Int64>()
        engine.core.locked {
            engine.core.checkpointBytes = 64 << 10
            engine.core.hooks.beforeCheckpointSync = {
                syncStarted.set(true)
                _ = gate.wait(timeout: .now() + 20)
            }
            engine.core.hooks.checkpointed = { _, offset in checkpointed.set(offset) }
        }
        defer { gate.signal() }
        let r = try engine.request(DownloadRequest(url: "http://o.test/big"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let transfer = driver.transfer(0)
        #expect(transfer.respond(200, ["Content-Length": "1000000", "ETag": "\"e\""]))

        // 100 000 bytes cross the checkpoint size; the write returns although the sync is held.
        let chunk = EngineFixture.body(100_000)
        let wrote = Self.offThread { (try? transfer.send(chunk)) != nil }
        #expect(try await withTimeout(20) { try await wrote.value() })
        _ = try await withTimeout(20) { try await syncStarted.value() }
        #expect(engine.snapshot(id: r.snapshot.id)?.bytesWritten == 100_000)
        // Not yet synced: nothing beyond 0 may be stored as durable.
        #expect(engine.core.locked { engine.core.byID[r.snapshot.id]?.durableOffset } == 0)
        #expect(try Self.stored(engine).first { $0.id == r.snapshot.id }?.verifiedOffset == 0)

        gate.signal()
        #expect(try await withTimeout(10) { try await checkpointed.value() } == 100_000)
        #expect(try Self.stored(engine).first { $0.id == r.snapshot.id }?.verifiedOffset == 100_000)
        await engine.shutdown()
    }

    @Test func callersPerDownloadAreCapped() throws {
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: FakeTransferDriver()) {
            $0.maxCallersPerDownload = 3
        }
        let a = try engine.request(DownloadRequest(url: "http://o.test/c"))
        _ = try engine.request(DownloadRequest(url: "http://o.test/c"))
        _ = try engine.request(DownloadRequest(url: "http://o.test/c"))
        #expect(throws: EngineError.tooManyCallers("")) { try engine.request(DownloadRequest(url: "http://o.test/c")) }
        do {
            _ = try engine.request(DownloadRequest(url: "http://o.test/c"))
        } catch {
            #expect(error.code == .tooManyCallers)
        }
        #expect(engine.snapshot(id: a.snapshot.id)?.callers == 3)
        // Another URL is not affected; a caller leaving makes room.
        _ = try engine.request(DownloadRequest(url: "http://o.test/other"))
        #expect(engine.cancel(token: a.token) != nil)
        _ = try engine.request(DownloadRequest(url: "http://o.test/c"))
        #expect(engine.snapshot(id: a.snapshot.id)?.callers == 3)
    }

    @Test func anEndedDownloadDropsOldTokensInsteadOfRefusing() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: [:], body: [1, 2, 3]) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxCallersPerDownload = 2 }
        let (first, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/done"),
                                                                until: [.completed])
        var tokens = [first.token]
        for _ in 0..<5 { tokens.append(try engine.request(DownloadRequest(url: "http://o.test/done")).token) }
        #expect(engine.snapshot(id: first.snapshot.id)?.callers == 2)
        // A request that is refused (409) takes nobody's place.
        #expect(throws: EngineError.conflict("")) { try engine.request(DownloadRequest(url: "http://o.test/done", size: 4)) }
        #expect(engine.liveTokens(among: tokens).count == 2)
        // Exactly the cap's worth of tokens still work; the newest one always does.
        #expect(engine.cancel(token: try #require(tokens.last)) != nil)
        #expect(tokens.dropLast().filter { engine.cancel(token: $0) != nil }.count == 1)
        #expect(driver.startCount == 1)
        await engine.shutdown()
    }

    /// The token dropped to make room takes its callback with it, as its caller's `DELETE` would
    /// (the caller can no longer withdraw it, and the restarted download's end is not theirs).
    @Test func aTokenDroppedToMakeRoomTakesItsCallbackWithIt() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 404, headers: [:], body: []) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxCallersPerDownload = 1 }
        let (first, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/gone"),
                                                                     until: [.failed])
        try engine.webhooks.register(CallbackRequest(url: "http://127.0.0.1:9/hook"), token: first.token, snapshot: failed)
        #expect(engine.webhooks.counts.registrations == 1)
        _ = try engine.request(DownloadRequest(url: "http://o.test/gone"))
        #expect(engine.liveTokens(among: [first.token]).isEmpty)
        #expect(await eventually(within: 5) { engine.webhooks.counts.registrations == 0 })
        await engine.shutdown()
    }

    @Test func failedDownloadsAreBoundedInCountAndAge() async throws {
        let clock = ManualScheduler()
        let driver = FakeTransferDriver { _, _ in .init(status: 404, headers: [:], body: []) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) {
            $0.maxFailedDownloads = 2
            $0.failedRetention = 1000
        }
        var ids: [String] = []
        for name in ["a", "b", "c"] {
            let (r, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/\(name)"),
                                                                     until: [.failed])
            #expect(failed.error?.code == .httpError)
            ids.append(r.snapshot.id)
            clock.advance(10)
        }
        // Count: the oldest failure is forgotten (memory and journal).
        #expect(engine.snapshot(id: ids[0]) == nil)
        #expect(engine.snapshot(id: ids[1]) != nil && engine.snapshot(id: ids[2]) != nil)
        #expect(Set(try Self.stored(engine).map(\.id)) == Set(ids[1...]))
        // Age: failures older than the retention go when another download fails.
        clock.advance(2000)
        let (d, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/d"), until: [.failed])
        #expect(engine.list().map(\.id) == [d.snapshot.id])
        #expect(try Self.stored(engine).map(\.id) == [d.snapshot.id])
        #expect(engine.core.locked { Set(engine.core.failedRecords.keys) } == [d.snapshot.id], "the failed index follows")
        // Asked for again, it runs (out of the index) and fails again (back in it).
        let again = try engine.request(DownloadRequest(url: "http://o.test/d"))
        _ = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: again.snapshot.id, [.failed]) }
        #expect(driver.startCount == 5)
        #expect(engine.core.locked {
            Set(engine.core.failedRecords.keys) == Set(engine.core.byID.values.filter { $0.state == .failed }.map(\.id))
        })
        await engine.shutdown()
    }

    @Test func discardingAPartialDoesNotWaitForItsDeletion() async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        // Every file system counts as low on space: the next attempt purges paused partials first.
        let engine = try DownloadEngine(configuration: EngineFixture.configuration(root), driver: driver,
                                        diskPressure: DiskPressure(minFreeBytes: Int64.max, minFreeFraction: 0))
        let x = try await EngineFixture.partial(engine, driver: driver, url: "http://o.test/x",
                                                headers: ["Content-Length": "10000", "ETag": "\"x\""],
                                                sending: [UInt8](repeating: 1, count: 5000))
        let partials = root.appendingPathComponent("state/partials").path
        let partial = partials + "/\(x.snapshot.id).part"
        #expect(FileStore.fileSize(partial) == 5000)

        let gate = DispatchSemaphore(value: 0)
        let removing = OneShot<Bool>()
        engine.core.locked {
            engine.core.hooks.beforeRemove = {
                removing.set(true)
                _ = gate.wait(timeout: .now() + 20)
            }
        }
        defer { gate.signal() }
        // request() purges x's partial on the caller's thread: it must not wait for the deletion.
        let answer = Self.offThread { (try? engine.request(DownloadRequest(url: "http://o.test/y"))) != nil }
        #expect(try await withTimeout(20) { try await answer.value() })
        _ = try await withTimeout(20) { try await removing.value() }
        #expect(engine.snapshot(id: x.snapshot.id)?.bytesWritten == 0)
        #expect(FileStore.fileSize(partial) == nil)  // The name is free at once…
        let aside = try FileManager.default.contentsOfDirectory(atPath: partials).filter { $0.hasSuffix(FileStore.trashSuffix) }
        #expect(aside.count == 1)  // …the file goes on the work queue.
        gate.signal()
        engine.core.workQueue.sync(flags: .barrier) {}
        #expect(try FileManager.default.contentsOfDirectory(atPath: partials).filter { $0.hasSuffix(FileStore.trashSuffix) }.isEmpty)
        await engine.shutdown()
    }

    @Test func partialsSetAsideBeforeACrashAreDeletedOnStart() throws {
        let root = EngineFixture.root()
        _ = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let partials = root.appendingPathComponent("state/partials")
        try Data([1, 2]).write(to: partials.appendingPathComponent("0123456789abcdef.part.7\(FileStore.trashSuffix)"))
        _ = try EngineFixture.engine(root, driver: FakeTransferDriver())
        #expect(try FileManager.default.contentsOfDirectory(atPath: partials.path).isEmpty)
    }
}
