import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct EngineCoalescingTests {
    @Test func thousandConcurrentRequestsMakeOneTransfer() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(root, driver: driver)
        let results = try await withThrowingTaskGroup(of: Enqueued.self) { group in
            for i in 0..<1000 {
                // Spellings that normalise to the same URL.
                let url = i % 3 == 0 ? "http://Origin.test/file.bin" : (i % 3 == 1 ? "http://origin.test:80/file.bin#x" : "HTTP://origin.test/file.bin")
                group.addTask { try engine.request(DownloadRequest(url: url)) }
            }
            var all: [Enqueued] = []
            for try await r in group { all.append(r) }
            return all
        }
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.startCount == 1)
        #expect(Set(results.map(\.snapshot.id)).count == 1)
        #expect(Set(results.map(\.token)).count == 1000)
        #expect(results.filter { !$0.coalesced }.count == 1)
        #expect(engine.statistics.coalescedJoins == 999)
        #expect(engine.snapshot(id: results[0].snapshot.id)?.callers == 1000)
        #expect(driver.transfer(0).request.url == "http://origin.test/file.bin")
        await engine.shutdown()
    }

    @Test func tokensAndIdsAreRandomHex() throws {
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: FakeTransferDriver())
        let a = try engine.request(DownloadRequest(url: "http://o.test/a"))
        let b = try engine.request(DownloadRequest(url: "http://o.test/a"))
        let c = try engine.request(DownloadRequest(url: "http://o.test/c"))
        let hex = { (s: String) in s.allSatisfy { "0123456789abcdef".contains($0) } }
        #expect(a.token.count == 32 && hex(a.token))
        #expect(a.snapshot.id.count == 16 && hex(a.snapshot.id))
        #expect(a.token != b.token && a.token != a.snapshot.id)
        #expect(a.snapshot.id == b.snapshot.id && a.snapshot.id != c.snapshot.id)
    }

    /// A joiner's sha256 or size is not imposed on callers who did not ask for it (a wrong one
    /// would fail their download and drop its bytes): 409 while they hold it; bound once nobody
    /// else does. A size contradicting what the origin announced is a conflict too.
    @Test func aJoinersExpectationsNeverBindOtherCallers() throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let url = "http://o.test/shared"
        let a = try engine.request(DownloadRequest(url: url))
        let sha = String(repeating: "c", count: 64)
        #expect(throws: EngineError.conflict("")) { try engine.request(DownloadRequest(url: url, sha256: sha)) }
        #expect(throws: EngineError.conflict("")) { try engine.request(DownloadRequest(url: url, size: 5)) }
        #expect(engine.snapshot(id: a.snapshot.id)?.callers == 1)
        _ = try engine.request(DownloadRequest(url: url))  // Without expectations: joins.
        // Alone with it (every caller gone, paused), a caller may set them.
        let b = try engine.request(DownloadRequest(url: "http://o.test/alone"))
        #expect(engine.cancel(token: b.token)?.callers == 0)
        let c = try engine.request(DownloadRequest(url: "http://o.test/alone", sha256: sha))
        #expect(c.snapshot.id == b.snapshot.id)
        #expect(throws: EngineError.conflict("")) {
            try engine.request(DownloadRequest(url: "http://o.test/alone", sha256: String(repeating: "d", count: 64)))
        }
    }

    @Test func rejectsBadInput() throws {
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: FakeTransferDriver())
        #expect(throws: EngineError.invalidURL("")) { try engine.request(DownloadRequest(url: "ftp://x/y")) }
        #expect(throws: EngineError.urlCredentials("")) { try engine.request(DownloadRequest(url: "http://u:p@x/y")) }
        #expect(throws: EngineError.invalidChecksum("")) { try engine.request(DownloadRequest(url: "http://x/y", sha256: "abc")) }
        let sha = String(repeating: "a", count: 64)
        _ = try engine.request(DownloadRequest(url: "http://x/y", sha256: sha, size: 10))
        #expect(throws: EngineError.conflict("")) { try engine.request(DownloadRequest(url: "http://x/y", sha256: String(repeating: "b", count: 64))) }
        #expect(throws: EngineError.conflict("")) { try engine.request(DownloadRequest(url: "http://x/y", size: 11)) }
        _ = try engine.request(DownloadRequest(url: "http://x/y", sha256: sha.uppercased(), size: 10))
    }

    @Test func completesAndAnswersLaterRequestsFromTheStoredFile() async throws {
        let root = EngineFixture.root()
        let body = EngineFixture.body(50_000)
        let driver = FakeTransferDriver { _, _ in
            .init(status: 200, headers: ["Content-Length": "\(body.count)", "ETag": "\"v1\"",
                                         "Content-Disposition": "attachment; filename=\"data.bin\""], body: body)
        }
        let engine = try EngineFixture.engine(root, driver: driver)
        let (first, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/x/file"),
                                                                   until: [.completed, .failed])
        #expect(done.state == .completed)
        #expect(done.size == Int64(body.count))
        #expect(done.sha256 == SHA256Hasher.hex(body))
        #expect(done.fileName == "data.bin")
        let file = try #require(engine.completedFile(id: first.snapshot.id))
        #expect(file.path.hasPrefix(root.appendingPathComponent("cache").path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file.path)) == Data(body))
        let again = try engine.request(DownloadRequest(url: "http://o.test/x/file"))
        #expect(again.coalesced && again.snapshot.state == .completed && again.snapshot.id == first.snapshot.id)
        #expect(driver.startCount == 1)
        // persistent wins and moves the file into the data area (on the work queue).
        let movedTo = OneShot<String>()
        engine.core.locked { engine.core.hooks.moved = { _, path in movedTo.set(path ?? "") } }
        let persistent = try engine.request(DownloadRequest(url: "http://o.test/x/file", storage: .persistent))
        #expect(persistent.snapshot.storage == .persistent)
        _ = try await withTimeout(20) { try await movedTo.value() }
        let moved = try #require(engine.completedFile(id: first.snapshot.id))
        #expect(moved.path.hasPrefix(root.appendingPathComponent("data").path))
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: moved.path)) == Data(body))
        // The file vanishing makes it downloadable again (same id). Asked for its file, it says it
        // failed instead of completed (its callers would wait for a file never served).
        try FileManager.default.removeItem(atPath: moved.path)
        #expect(engine.completedFile(id: first.snapshot.id) == nil)
        let gone = try #require(engine.snapshot(id: first.snapshot.id))
        #expect(gone.state == .failed && gone.error?.code == .diskError && gone.sha256 == nil, "\(gone)")
        let redo = try engine.request(DownloadRequest(url: "http://o.test/x/file"))
        #expect(!redo.coalesced && redo.snapshot.id == first.snapshot.id)
        try await withTimeout(20) { await driver.waitForStarts(2) }
    }

    /// A stored file changed on disk (another size: cut, or overwritten) is not the verified file:
    /// it is never served, and the next request fetches it anew.
    @Test func aStoredFileOfAnotherSizeIsFetchedAnew() async throws {
        let body = EngineFixture.body(5_000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "\(body.count)"], body: body) }
        let recorder = StoryRecorder()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.storyteller = recorder.tell }
        let (first, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/cut"), until: [.completed])
        let path = try #require(done.path)
        #expect(truncate(path, 1000) == 0)
        let watcher = engine.watchAll()!
        defer { watcher.cancel() }
        let redo = try engine.request(DownloadRequest(url: "http://o.test/cut"))
        #expect(!redo.coalesced && redo.snapshot.id == first.snapshot.id && redo.snapshot.state != .completed)
        // The stored file's loss is told as a failure (the story, /events) before it starts anew.
        let story = try await recorder.wait(for: first.snapshot.id) { if case .failed = $0 { true } else { false } }
        guard case .failed(let code, _, _, _)? = story.first(where: { if case .failed = $0 { true } else { false } }) else {
            Issue.record("no failed step: \(story)")
            return
        }
        #expect(code == .diskError)
        var toldFailed = false
        let deadline = Date().addingTimeInterval(5)
        while !toldFailed && Date() < deadline {
            guard case .item(let item) = watcher.poll(waker: {}) else {
                try await Task.sleep(nanoseconds: 10_000_000)
                continue
            }
            if case .event(.failed(let snapshot)) = item.kind, snapshot.id == first.snapshot.id { toldFailed = true }
        }
        #expect(toldFailed, "/events hears the failure")
        let again = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: first.snapshot.id, [.completed]) }
        let againPath = try #require(again.path)
        #expect(again.size == 5_000 && FileStore.fileSize(againPath) == 5_000)
        #expect(driver.startCount == 2)
    }

    /// The move into the data area fails (here a directory stands where the file should go): the
    /// file stays in the cache area and is served from there, but stays `persistent` (cache purges
    /// take only `cache` files; the next start moves it); before, it silently became `cache` again.
    @Test func aFailedMoveKeepsTheFilePersistentWhereItIs() async throws {
        let root = EngineFixture.root()
        let body = EngineFixture.body(5_000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "\(body.count)"], body: body) }
        let engine = try EngineFixture.engine(root, driver: driver)
        let (first, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/x/file"),
                                                                   until: [.completed, .failed])
        #expect(done.state == .completed)
        let file = try #require(engine.completedFile(id: first.snapshot.id))
        let blocker = root.appendingPathComponent("data").appendingPathComponent((file.path as NSString).lastPathComponent).path
        let moved = OneShot<String>()
        engine.core.locked {
            engine.core.hooks.beforeMove = {
                try? FileManager.default.createDirectory(atPath: blocker + "/inside", withIntermediateDirectories: true)
            }
            engine.core.hooks.moved = { _, path in moved.set(path ?? "") }
        }
        let persistent = try engine.request(DownloadRequest(url: "http://o.test/x/file", storage: .persistent))
        #expect(try await withTimeout(20) { try await moved.value() } == file.path)
        #expect(engine.snapshot(id: first.snapshot.id)?.storage == .persistent)
        #expect(persistent.snapshot.storage == .persistent)
        #expect(engine.completedFile(id: first.snapshot.id)?.path == file.path)
    }

    @Test func queuesBeyondMaxConcurrentTransfersInOrder() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxConcurrentTransfers = 2 }
        let a = try engine.request(DownloadRequest(url: "http://o.test/a"))
        _ = try engine.request(DownloadRequest(url: "http://o.test/b"))
        let c = try engine.request(DownloadRequest(url: "http://o.test/c"))
        let d = try engine.request(DownloadRequest(url: "http://o.test/d"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(c.snapshot.state == .queued && d.snapshot.state == .queued)
        #expect(engine.statistics.activeTransfers == 2)
        // Cancelling the first frees its slot for c (FIFO), not d.
        #expect(engine.cancel(token: a.token)?.state == .paused)
        try await withTimeout(20) { await driver.waitForStarts(3) }
        #expect(driver.transfer(2).request.url == "http://o.test/c")
        #expect(engine.snapshot(id: d.snapshot.id)?.state == .queued)
        // Cancelling a queued download dequeues it.
        #expect(engine.cancel(token: d.token)?.state == .paused)
        #expect(engine.cancel(token: d.token) == nil)
        await engine.shutdown()
        #expect(throws: EngineError.shuttingDown()) { try engine.request(DownloadRequest(url: "http://o.test/z")) }
    }
}

extension EngineCoalescingTests {
    /// A streaming reader of a completed download whose file vanished is told the download's
    /// failure, `disk_error` (before, the view was refreshed before the failure was recorded: the
    /// reader's 502 said `unknown`).
    @Test func aReaderOfAFileThatVanishedIsToldDiskError() async throws {
        let body = EngineFixture.body(5_000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "\(body.count)"], body: body) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (first, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/gone"), until: [.completed])
        let reader = try engine.attachReader(DownloadRequest(url: "http://o.test/gone"))
        defer { reader.close() }
        try FileManager.default.removeItem(atPath: try #require(done.path))
        #expect(engine.completedFile(id: first.snapshot.id) == nil)
        var code: DownloadFailure.Code?
        _ = await eventually(within: 5) {
            if case .failed(let failure, _) = engine.core.locked({ engine.core.byID[first.snapshot.id]?.tail?.current.phase }) {
                code = failure.code
            }
            return code != nil
        }
        #expect(code == .diskError)
    }
}
