import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct EngineResumeTests {
    let body = EngineFixture.body(40_000)

    /// Starts a download, lets it write `kept` bytes under `headers`, then the last caller cancels.
    func pausedDownload(headers: [String: String], kept: Int, configure: (inout EngineConfiguration) -> Void = { _ in }) async throws
        -> (engine: DownloadEngine, driver: FakeTransferDriver, id: String, root: URL) {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(root, driver: driver, configure: configure)
        let a = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        let b = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let t = driver.transfer(0)
        #expect(t.header("Range") == nil)
        #expect(t.respond(200, headers.merging(["Content-Length": "\(body.count)"]) { a, _ in a }))
        try t.send(Array(body[0..<kept]))
        // One caller leaving changes nothing.
        #expect(engine.cancel(token: a.token)?.state == .downloading)
        #expect(!t.isCancelled)
        let event = try await EngineFixture.cancelAndSettle(engine, token: b.token, id: a.snapshot.id)
        guard case .paused(let paused) = event else { throw TimeoutError(seconds: 0) }
        #expect(paused.callers == 0)
        #expect(paused.bytesWritten == (paused.resumable ? Int64(kept) : 0))
        #expect(t.isCancelled)
        #expect(engine.cancel(token: b.token) == nil)
        return (engine, driver, a.snapshot.id, root)
    }

    /// An origin that caps every answer, a plain GET's too (`206 bytes 0-M/T`): the first piece is
    /// kept and the rest asked for with `Range` and `If-Range`, never thrown away and asked again.
    @Test func aCappedAnswerToTheFirstRequestIsKeptAndTheRestAskedFor() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let id = try engine.request(DownloadRequest(url: "http://o.test/f.bin")).snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let first = driver.transfer(0)
        #expect(first.header("Range") == nil)
        #expect(first.respond(206, ["Content-Range": "bytes 0-9999/40000", "ETag": "\"v1\""]))
        try first.send(Array(body[..<10_000]))
        first.finish()
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let rest = driver.transfer(1)
        #expect(rest.header("Range") == "bytes=10000-" && rest.header("If-Range") == "\"v1\"")
        #expect(rest.respond(206, ["Content-Range": "bytes 10000-39999/40000", "ETag": "\"v1\""]))
        try rest.send(Array(body[10_000...]))
        rest.finish()
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body))
        await engine.shutdown()
    }

    @Test func lastCancelPausesAndNextRequestResumesWithRangeAndIfRange() async throws {
        let (engine, driver, id, root) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 12_345)
        let partial = root.appendingPathComponent("state/partials/\(id).part").path
        #expect(FileStore.fileSize(partial) == 12_345)
        // The kept bytes' hash is good for the resume (nothing touched the file since it closed):
        // they are not read again.
        var st = stat()
        #expect(stat(partial, &st) == 0)
        #expect(engine.core.locked { engine.core.byID[id]?.keptHash?.stamp } == FileStamp(st))
        #expect(engine.snapshot(id: id)?.bytesWritten == 12_345)
        #expect(engine.snapshot(id: id)?.resumable == true)
        let sub = try #require(engine.subscribe(id: id))
        let again = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        #expect(again.snapshot.id == id)
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let t = driver.transfer(1)
        #expect(t.header("Range") == "bytes=12345-")
        #expect(t.header("If-Range") == "\"v1\"")
        #expect(t.respond(206, ["Content-Range": "bytes 12345-39999/40000", "ETag": "\"v1\""]))
        try t.send(Array(body[12_345...]))
        t.finish()
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        #expect(events.contains { if case .resumed(12_345, false, _) = $0 { return true } else { return false } })
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body))
        let file = try #require(engine.completedFile(id: id))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file.path)) == Data(body))
        #expect(!FileManager.default.fileExists(atPath: partial))
        #expect(engine.statistics.resumes == 1)
    }

    /// A resume answered 200 of another version (the file changed): the stored row that named the
    /// kept bytes of the old one is replaced durably (off the transfer thread) before the new
    /// version's first byte lands, so a crash can never leave the new bytes under the old offset
    /// and validator (resumed with the old `If-Range`: spliced). The 200 is asked for again from 0
    /// once that is recorded; a full state store waits as a full disk does, the origin not asked.
    @Test func aRestartIsRecordedBeforeTheNewVersionsFirstByte() async throws {
        let (engine, driver, id, root) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 12_345)
        let state = root.appendingPathComponent("state").path
        #expect(try StateFixture.stored(engine).first?.verifiedOffset == 12_345)
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(!driver.transfer(1).respond(200, ["ETag": "\"v2\"", "Content-Length": "\(body.count)"]))
        driver.transfer(1).finish()
        try await withTimeout(20) { await driver.waitForStarts(3) }
        // Asked for again only once the old row is gone: nothing names the old bytes any more.
        let row = try #require(try StateFixture.read(state).first)
        #expect(row.verifiedOffset == 0 && row.validator == nil, "\(row)")
        let again = driver.transfer(2)
        #expect(again.header("Range") == nil)
        #expect(again.respond(200, ["ETag": "\"v2\"", "Content-Length": "\(body.count)"]))
        try again.send(body)
        again.finish()
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body))
        await engine.shutdown()

        // A 200 of the kept bytes' own version (an origin that ignores ranges) goes on at once.
        let (same, sameDriver, sameID, _) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 12_345)
        _ = try same.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await sameDriver.waitForStarts(2) }
        #expect(sameDriver.transfer(1).respond(200, ["ETag": "\"v1\"", "Content-Length": "\(body.count)"]))
        try sameDriver.transfer(1).send(body)
        sameDriver.transfer(1).finish()
        let sameDone = try await withTimeout(20) { try await EngineFixture.waitFor(same, id: sameID, [.completed, .failed]) }
        #expect(sameDone.state == .completed && sameDriver.startCount == 2)
        #expect(sameDone.sha256 == SHA256Hasher.hex(body), "the kept bytes and the 200's rest, not the 200 appended to them")
        await same.shutdown()

        let (full, fullDriver, fullID, _) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 12_345)
        _ = try full.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await fullDriver.waitForStarts(2) }
        full.core.stateWriter.gateCommits { _ throws(StateStoreError) in throw StateStoreError(kind: .full, message: "disk full") }
        #expect(!fullDriver.transfer(1).respond(200, ["ETag": "\"v2\"", "Content-Length": "\(body.count)"]))
        fullDriver.transfer(1).finish()
        #expect(await eventually(within: 5) { full.snapshot(id: fullID)?.reason == "disk_full" })
        #expect(fullDriver.startCount == 2, "the origin is not asked while the restart cannot be recorded")
        full.core.stateWriter.gateCommits(nil)
        await full.shutdown()
    }

    /// A resume answered 404 or 410 (a CDN node's passing error, a signed URL expired) fails the
    /// download but keeps its bytes: asked again once the resource is back, it resumes with
    /// `Range` and `If-Range` instead of fetching them again.
    @Test(arguments: [404, 410])
    func aResumeAnsweredGoneFailsAndKeepsTheBytesForTheNextRequest(status: Int) async throws {
        let (engine, driver, id, root) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 12_345)
        let partial = root.appendingPathComponent("state/partials/\(id).part").path
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        _ = driver.transfer(1).respond(status, ["Content-Length": "0"])  // Refused (false): not a body.
        driver.transfer(1).finish()
        let failed = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.failed]) }
        #expect(failed.error?.code == .httpError && failed.error?.httpStatus == status)
        #expect(failed.bytesWritten == 12_345 && FileStore.fileSize(partial) == 12_345, "the bytes are kept")
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(3) }
        let t = driver.transfer(2)
        #expect(t.header("Range") == "bytes=12345-" && t.header("If-Range") == "\"v1\"")
        #expect(t.respond(206, ["Content-Range": "bytes 12345-39999/40000", "ETag": "\"v1\""]))
        try t.send(Array(body[12_345...]))
        t.finish()
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body))
    }

    /// Every byte was kept before the attempt could end (a pause or a shutdown while waiting for
    /// the origin's close): the resume's `416 bytes */40000` says they are the whole file. They are
    /// verified and published; the 416's error page is no part of it, and nothing is fetched again.
    @Test func aResumeAnswered416ForTheWholeFileCompletesWithTheKeptBytes() async throws {
        let (engine, driver, id, _) = try await pausedDownload(headers: ["ETag": "\"v1\"", "Content-Type": "application/x-tar"],
                                                               kept: 40_000)
        let sub = try #require(engine.subscribe(id: id))
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let t = driver.transfer(1)
        #expect(t.header("Range") == "bytes=40000-" && t.header("If-Range") == "\"v1\"")
        let page = Array("<html>416</html>".utf8)
        #expect(t.respond(416, ["Content-Range": "bytes */40000", "Content-Type": "text/html", "Content-Length": "\(page.count)"]))
        try t.send(page)
        t.finish()
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.sha256 == SHA256Hasher.hex(body) && done.size == 40_000)
        let file = try #require(engine.completedFile(id: id))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file.path)) == Data(body))
        #expect(file.contentType == "application/x-tar")
        #expect(driver.startCount == 2)
        #expect(engine.statistics.restarts == 0)
    }

    /// A 416 of another size, or of another version, is a restart as before.
    @Test(arguments: [["Content-Range": "bytes */50000"], ["Content-Range": "bytes */40000", "ETag": "\"v2\""], [:]])
    func aResumeAnswered416OtherwiseRestarts(_ fields: [String: String]) async throws {
        let (engine, driver, id, root) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 40_000)
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(!driver.transfer(1).respond(416, fields))
        try await withTimeout(20) { await driver.waitForStarts(3) }
        let again = driver.transfer(2)
        #expect(again.header("Range") == nil)
        // The kept bytes are dropped before the origin is asked again.
        #expect(engine.snapshot(id: id)?.bytesWritten == 0)
        let row = try #require(try StateFixture.read(root.appendingPathComponent("state").path).first)
        #expect(row.verifiedOffset == 0 && row.validator == nil, "\(row)")
        #expect(again.respond(200, ["ETag": "\"v2\"", "Content-Length": "\(body.count)"]))
        try again.send(body)
        again.finish()
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body))
        #expect(engine.statistics.restarts == 1)
        await engine.shutdown()
    }

    @Test func weakETagIsNotResumable() async throws {
        let (engine, driver, id, root) = try await pausedDownload(headers: ["ETag": "W/\"v1\""], kept: 5000)
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("state/partials/\(id).part").path))
        #expect(engine.snapshot(id: id)?.resumable == false)
        #expect(engine.snapshot(id: id)?.bytesWritten == 0)
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("Range") == nil)
        #expect(driver.transfer(1).header("If-Range") == nil)
    }

    @Test func lastModifiedOnlyResume() async throws {
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT"
        let (engine, driver, id, _) = try await pausedDownload(headers: ["Last-Modified": lm, "Date": "Mon, 07 Nov 1994 08:49:37 GMT"], kept: 777)
        #expect(engine.snapshot(id: id)?.bytesWritten == 777)
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("Range") == "bytes=777-")
        #expect(driver.transfer(1).header("If-Range") == lm)
    }

    @Test func changedVersionAnswered200RestartsFromZero() async throws {
        let (engine, driver, id, _) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 9000)
        #expect(engine.snapshot(id: id)?.bytesWritten == 9000)
        let sub = try #require(engine.subscribe(id: id))
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let v2 = EngineFixture.body(30_000, seed: 9)
        #expect(driver.transfer(1).header("If-Range") == "\"v1\"")
        // Another version: asked for again from 0 once the restart is recorded.
        #expect(!driver.transfer(1).respond(200, ["Content-Length": "30000", "ETag": "\"v2\""]))
        driver.transfer(1).finish()
        try await withTimeout(20) { await driver.waitForStarts(3) }
        let t = driver.transfer(2)
        #expect(t.header("Range") == nil && t.header("If-Range") == nil)
        #expect(t.respond(200, ["Content-Length": "30000", "ETag": "\"v2\""]))
        try t.send(v2)
        t.finish()
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        #expect(events.contains { if case .resumed(0, true, _) = $0 { return true } else { return false } })
        guard case .completed(let done) = events.last else { Issue.record("not completed: \(events)"); return }
        #expect(done.size == 30_000)
        let file = try #require(engine.completedFile(id: id))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file.path)) == Data(v2))
        #expect(engine.statistics.restarts == 1)
    }

    @Test func aNewVersionOverTheSizeLimitFailsAndTheOldBytesGo() async throws {
        let (engine, driver, id, root) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 9000) { $0.maxFileSize = 45_000 }
        let partial = root.appendingPathComponent("state/partials/\(id).part").path
        #expect(FileStore.fileSize(partial) == 9000)
        let sub = try #require(engine.subscribe(id: id))
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("If-Range") == "\"v1\"")
        #expect(!driver.transfer(1).respond(200, ["Content-Length": "50000", "ETag": "\"v2\""]))
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        guard case .failed(let failed) = events.last else { Issue.record("not failed: \(events)"); return }
        #expect(failed.error?.code == .tooLarge && failed.bytesWritten == 0)
        // v1's bytes are of no use to any later attempt (it would be answered v2 again).
        #expect(await eventually(within: 10) { !FileManager.default.fileExists(atPath: partial) })
    }

    @Test func wrongContentRangeDiscardsAndRetriesFromZero() async throws {
        let (engine, driver, id, _) = try await pausedDownload(headers: ["ETag": "\"v1\""], kept: 1000)
        #expect(engine.snapshot(id: id)?.bytesWritten == 1000)
        _ = try engine.request(DownloadRequest(url: "http://o.test/f.bin"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let sub = try #require(engine.subscribe(id: id))
        #expect(!driver.transfer(1).respond(206, ["Content-Range": "bytes 500-39999/40000", "ETag": "\"v1\""]))
        try await withTimeout(20) { await driver.waitForStarts(3) }
        #expect(driver.transfer(2).header("Range") == nil)
        // The bytes went at the refusal, the next attempt kept none: its body is still a restart.
        #expect(driver.transfer(2).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { if case .resumed = $0 { true } else { false } } }
        #expect(events.contains { if case .resumed(0, true, _) = $0 { true } else { false } }, "\(events)")
        #expect(engine.statistics.restarts == 1)
    }

    @Test func dropMidBodyRetriesFromKeptBytes() async throws {
        let body = self.body
        let driver = FakeTransferDriver { request, index in
            if index == 0 {
                return .init(status: 200, headers: ["Content-Length": "40000", "ETag": "\"e\""], body: body, cutAfter: 17_000)
            }
            return .init(status: 206, headers: ["Content-Range": "bytes 17000-39999/40000", "ETag": "\"e\""], body: Array(body[17_000...]))
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (_, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f.bin", sha256: SHA256Hasher.hex(body), size: 40_000),
                                                               until: [.completed, .failed])
        #expect(done.state == .completed)
        #expect(driver.startCount == 2)
        #expect(driver.transfer(1).header("Range") == "bytes=17000-")
        #expect(driver.transfer(1).header("If-Range") == "\"e\"")
        #expect(engine.statistics.retries == 1)
    }

    @Test func transientHTTPErrorsRetriedThenSucceed() async throws {
        let body = EngineFixture.body(3000)
        let driver = FakeTransferDriver { _, index in
            switch index {
            case 0: return .init(status: 503, headers: ["Retry-After": "0"], body: [])
            case 1: return .init(status: 429, headers: [:], body: [])
            default: return .init(status: 200, headers: ["Content-Length": "3000"], body: body)
            }
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (_, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f.bin"),
                                                               until: [.completed, .failed])
        #expect(done.state == .completed)
        #expect(driver.startCount == 3)
    }

    @Test func notFoundFailsAtOnceAndAFreshRequestRestarts() async throws {
        let driver = FakeTransferDriver { _, index in
            index == 0 ? .init(status: 404, headers: [:], body: []) : .init(status: 200, headers: [:], body: [1, 2, 3])
        }
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: driver)
        let (r, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/missing"),
                                                                 until: [.completed, .failed])
        #expect(failed.state == .failed)
        #expect(failed.error?.code == .httpError && failed.error?.httpStatus == 404)
        #expect(driver.startCount == 1)
        #expect(engine.completedFile(id: r.snapshot.id) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("cache").path).isEmpty)
        let again = try engine.request(DownloadRequest(url: "http://o.test/missing"))
        #expect(again.snapshot.id == r.snapshot.id)
        let done = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: r.snapshot.id, [.completed]) }
        #expect(done.size == 3)
    }

    @Test func retriesExhaustedReportsStatus() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 500, headers: [:], body: []) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (_, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/broken"),
                                                                 until: [.failed])
        #expect(failed.error?.code == .retriesExhausted && failed.error?.httpStatus == 500)
        #expect(driver.startCount == 4)
    }

    @Test(arguments: [
        (TransferFailure.Kind.tooLarge, DownloadFailure.Code.tooLarge), (.blockedAddress, .destinationForbidden),
        (.tooManyRedirects, .tooManyRedirects),
    ])
    func policyFailuresAreFinal(_ kind: TransferFailure.Kind, _ code: DownloadFailure.Code) async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try engine.request(DownloadRequest(url: "http://o.test/x"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        driver.transfer(0).fail(kind)
        let failed = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: r.snapshot.id, [.failed]) }
        #expect(failed.error?.code == code)
        #expect(driver.startCount == 1)
    }

    @Test func checksumMismatchFailsAndDeletesTheFile() async throws {
        let body = EngineFixture.body(2000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "2000"], body: body) }
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: driver)
        let (_, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/x", sha256: String(repeating: "0", count: 64)),
                                                                 until: [.failed, .completed])
        #expect(failed.error?.code == .checksumMismatch)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("cache").path).isEmpty)
        // The partial is set aside at the verdict and deleted on the work queue: soon, not at once.
        let partials = root.appendingPathComponent("state/partials").path
        #expect(await eventually(within: 10) { (try? FileManager.default.contentsOfDirectory(atPath: partials).isEmpty) == true })
    }

    @Test func sizeMismatchFailsEarly() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "2000"], body: EngineFixture.body(2000)) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (_, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/x", size: 1999),
                                                                 until: [.failed, .completed])
        #expect(failed.error?.code == .sizeMismatch)
    }

    @Test func maxFileSizeRejectsAnnouncedLength() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "2000"], body: EngineFixture.body(2000)) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.maxFileSize = 1000 }
        let (_, failed) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/x"),
                                                                 until: [.failed, .completed])
        #expect(failed.error?.code == .tooLarge)
        #expect(driver.transfer(0).request.maxBodyBytes == 1000)
    }
}
