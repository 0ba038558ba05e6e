import Foundation
import Testing
@testable import DownloaderEngine

/// The engine tells each download's story (`DownloadStory`) in the order it decided the steps,
/// with the facts of each step. Driven by `FakeTransferDriver`, so every step is the test's doing.
@Suite(.timeLimit(.minutes(1)))
struct EngineStoryTests {
    let body = EngineFixture.body(40_000)
    static let url = "http://o.test/f.bin"

    static func engine(_ driver: FakeTransferDriver, _ recorder: StoryRecorder) throws -> DownloadEngine {
        try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.storyteller = recorder.tell }
    }

    @Test func pausedResumedRetriedCompleted() async throws {
        let (driver, recorder) = (FakeTransferDriver(), StoryRecorder())
        let engine = try Self.engine(driver, recorder)
        let first = try engine.request(DownloadRequest(url: Self.url, client: "10.1.2.3"))
        let id = first.snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        try driver.transfer(0).send(Array(body[0..<12_345]))
        _ = try await EngineFixture.cancelAndSettle(engine, token: first.token, id: id)

        _ = try engine.request(DownloadRequest(url: Self.url, client: "10.9.9.9"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(!driver.transfer(1).respond(503, ["Retry-After": "0"]))
        try await withTimeout(20) { await driver.waitForStarts(3) }
        let third = driver.transfer(2)
        #expect(third.respond(206, ["Content-Range": "bytes 12345-39999/40000", "ETag": "\"v1\""]))
        try third.send(Array(body[12_345...]))
        third.finish()

        let story = try await recorder.wait(for: id) { $0.isEnd }
        #expect(story.map(\.name) == ["created", "attempt_started", "head_received", "paused", "resumed",
                                      "attempt_started", "head_received", "retry_scheduled",
                                      "attempt_started", "head_received", "completed"])
        #expect(story[0] == .created(storage: .cache, client: "10.1.2.3", by: .caller))
        #expect(story[1] == .attemptStarted(attempt: 1, offset: 0, range: nil, ifRange: nil))
        #expect(story[2] == .headReceived(attempt: 1, status: 200, size: 40_000, validator: .etag,
                                          outcome: .body(offset: 0, restarted: false)))
        #expect(story[3] == .paused(reason: .callerCancelled, keptBytes: 12_345))
        #expect(story[4] == .resumed(client: "10.9.9.9", by: .caller, from: .paused, offset: 12_345))
        #expect(story[5] == .attemptStarted(attempt: 2, offset: 12_345, range: "bytes=12345-", ifRange: "\"v1\""))
        #expect(story[6] == .headReceived(attempt: 2, status: 503, size: nil, validator: .none, outcome: .refused("HTTP 503")))
        #expect(story[7] == .retryScheduled(attempt: 2, trouble: .init(cause: "http_status", message: "HTTP 503", httpStatus: 503),
                                            delay: 0, offset: 12_345))
        #expect(story[9] == .headReceived(attempt: 3, status: 206, size: 40_000, validator: .etag,
                                          outcome: .body(offset: 12_345, restarted: false)))
        guard case .completed(let size, let sha, let seconds, _, let attempts, let refetched) = story[10] else {
            Issue.record("\(story[10])")
            return
        }
        #expect(size == 40_000 && sha == engine.snapshot(id: id)?.sha256 && seconds >= 0)
        #expect(attempts == 3 && refetched == 0)
    }

    @Test func aRestartCountsTheBytesFetchedAgain() async throws {
        let (driver, recorder) = (FakeTransferDriver(), StoryRecorder())
        let engine = try Self.engine(driver, recorder)
        let first = try await EngineFixture.partial(engine, driver: driver, url: Self.url,
                                                    headers: ["Content-Length": "40000", "ETag": "\"v1\""],
                                                    sending: Array(body[0..<10_000]))
        let id = first.snapshot.id
        _ = try engine.request(DownloadRequest(url: Self.url))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).header("If-Range") == "\"v1\"")
        // A new version: asked for again from 0 once the restart is recorded, then its whole body.
        #expect(!driver.transfer(1).respond(200, ["Content-Length": "40000", "ETag": "\"v2\""]))
        driver.transfer(1).finish()
        try await withTimeout(20) { await driver.waitForStarts(3) }
        let again = driver.transfer(2)
        #expect(again.respond(200, ["Content-Length": "40000", "ETag": "\"v2\""]))
        try again.send(body)
        again.finish()
        let story = try await recorder.wait(for: id) { $0.isEnd }
        #expect(story.contains(.headReceived(attempt: 3, status: 200, size: 40_000, validator: .etag,
                                             outcome: .body(offset: 0, restarted: true))), "\(story)")
        guard case .completed(_, _, _, _, let attempts, let refetched)? = story.last else {
            Issue.record("\(story)")
            return
        }
        #expect(attempts == 3 && refetched == 10_000)
    }

    @Test func failsAfterRetriesWithEachCause() async throws {
        let (driver, recorder) = (FakeTransferDriver { _, index in
            // Attempts 1-3 drop mid-body, stall, time out on the head; the 4th (the last allowed) is refused.
            switch index {
            case 0: .init(status: 200, headers: ["Content-Length": "40000"], body: EngineFixture.body(40_000), cutAfter: 5_000)
            case 1: .init(status: 200, headers: ["Content-Length": "40000"], body: EngineFixture.body(40_000), cutAfter: 1_000,
                          failure: .stalled)
            default: .init(status: 502, headers: [:], body: [])
            }
        }, StoryRecorder())
        let engine = try Self.engine(driver, recorder)
        let asked = try engine.request(DownloadRequest(url: Self.url))
        let story = try await recorder.wait(for: asked.snapshot.id) { $0.isEnd }
        let retries = story.compactMap { event -> DownloadStory.AttemptTrouble? in
            if case .retryScheduled(_, let trouble, _, _) = event { return trouble }
            return nil
        }
        #expect(retries.map(\.cause) == ["connection", "stalled", "http_status"])
        #expect(retries.last?.httpStatus == 502)
        #expect(story.last == .failed(code: .retriesExhausted, message: "gave up after 4 attempts: HTTP 502", httpStatus: 502,
                                      attempts: 4))
        #expect(story.filter { $0.name == "attempt_started" }.count == 4)
    }

    @Test func aSecondCallerAndAReaderJoin() async throws {
        let (driver, recorder) = (FakeTransferDriver(), StoryRecorder())
        let engine = try Self.engine(driver, recorder)
        let first = try engine.request(DownloadRequest(url: Self.url, client: "a"))
        let id = first.snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let second = try engine.request(DownloadRequest(url: Self.url, client: "b"))
        #expect(second.coalesced)
        let reader = try engine.attachReader(DownloadRequest(url: Self.url, client: "c"))
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000"]))
        try driver.transfer(0).send(body)
        driver.transfer(0).finish()
        let story = try await recorder.wait(for: id) { $0.isEnd }
        reader.close()
        #expect(Array(story.prefix(4)) == [
            .created(storage: .cache, client: "a", by: .caller),
            .attemptStarted(attempt: 1, offset: 0, range: nil, ifRange: nil),
            .joined(client: "b", by: .caller, state: .downloading, callers: 2),
            .joined(client: "c", by: .reader, state: .downloading, callers: 3),
        ])
        // Asked again once completed: joined, no new attempt.
        _ = try engine.request(DownloadRequest(url: Self.url, client: "d"))
        let after = try await recorder.wait(for: id) { $0 == .joined(client: "d", by: .caller, state: .completed, callers: 3) }
        #expect(after.filter { $0.name == "attempt_started" }.count == 1)
    }

    @Test func aReaderLeavingPausesWithItsReason() async throws {
        let (driver, recorder) = (FakeTransferDriver(), StoryRecorder())
        let engine = try Self.engine(driver, recorder)
        let reader = try engine.attachReader(DownloadRequest(url: Self.url))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        try driver.transfer(0).send(Array(body[0..<1_000]))
        reader.close()
        let story = try await recorder.wait(for: reader.id) { $0.name == "paused" }
        #expect(story.last == .paused(reason: .readerLeft, keptBytes: 1_000))
    }

    /// The operator holds a download its callers had paused, then lifts the hold with none left:
    /// the story says the hold went, then that it stays paused for its callers (not the operator).
    @Test func aHoldLiftedWithNoCallerLeftTellsTheCallersReason() async throws {
        let (driver, recorder) = (FakeTransferDriver(), StoryRecorder())
        let engine = try Self.engine(driver, recorder)
        let first = try engine.request(DownloadRequest(url: Self.url))
        let id = first.snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        try driver.transfer(0).send(Array(body[0..<1_000]))
        _ = try await EngineFixture.cancelAndSettle(engine, token: first.token, id: id)
        guard case .done = try engine.operatorPausing(id: id), case .done = try engine.operatorResuming(id: id) else {
            Issue.record("the operator could not hold and release it")
            return
        }
        let expected: [DownloadStory.Event] = [.paused(reason: .callerCancelled, keptBytes: 1_000), .paused(reason: .operator, keptBytes: 1_000),
                                               .released(callers: 0), .paused(reason: .callerCancelled, keptBytes: 1_000)]
        var ending: [DownloadStory.Event] = []
        let deadline = Date().addingTimeInterval(5)  // (steps are told off the engine's lock: a bounded wait)
        while ending.count < expected.count && Date() < deadline {
            ending = Array(recorder.events(of: id).drop { $0.name != "paused" })
            if ending.count < expected.count { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        #expect(ending == expected)
    }

    @Test func movedStoppedAndRecovered() async throws {
        let root = EngineFixture.root()
        let (driver, recorder) = (FakeTransferDriver(), StoryRecorder())
        let first = try EngineFixture.engine(root, driver: driver) { $0.storyteller = recorder.tell }
        // A cache file asked for as persistent moves into the data area.
        let done = try first.request(DownloadRequest(url: "http://o.test/done")).snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "3"]))
        try driver.transfer(0).send([1, 2, 3])
        driver.transfer(0).finish()
        _ = try await recorder.wait(for: done) { $0.isEnd }
        _ = try first.request(DownloadRequest(url: "http://o.test/done", storage: .persistent))
        let moved = try await recorder.wait(for: done) { $0.name == "moved" }
        guard case .moved(.persistent, let path)? = moved.last else {
            Issue.record("\(moved)")
            return
        }
        #expect(path.hasPrefix(root.appendingPathComponent("data").path))
        // A running download stops with the engine and carries on at the next start.
        let running = try first.request(DownloadRequest(url: "http://o.test/running")).snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).respond(200, ["Content-Length": "40000", "ETag": "\"e\""]))
        try driver.transfer(1).send(Array(body[0..<5_000]))
        await first.shutdown()
        #expect(recorder.events(of: running).last == .stopped(bytesWritten: 5_000))

        let again = StoryRecorder()
        let second = try EngineFixture.engine(root, driver: FakeTransferDriver()) { $0.storyteller = again.tell }
        let story = try await again.wait(for: running) { $0.name == "attempt_started" }
        guard case .recovered(.downloading, let kept, 1)? = story.first else {
            Issue.record("\(story)")
            return
        }
        #expect(kept <= 5_000)
        #expect(story.last == .attemptStarted(attempt: 1, offset: kept, range: kept > 0 ? "bytes=\(kept)-" : nil,
                                               ifRange: kept > 0 ? "\"e\"" : nil))
        #expect(again.events(of: done).isEmpty, "a completed download is not told again")
        await second.shutdown()
    }

    @Test func aRunBeginsAgainWhenAPausedDownloadIsResumedAfterARestart() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver()
        let first = try EngineFixture.engine(root, driver: driver)
        let paused = try await EngineFixture.partial(first, driver: driver, url: Self.url,
                                                     headers: ["Content-Length": "40000", "ETag": "\"v1\""],
                                                     sending: Array(body[0..<10_000]))
        await first.shutdown()
        let (next, recorder) = (FakeTransferDriver(), StoryRecorder())
        let second = try EngineFixture.engine(root, driver: next) { $0.storyteller = recorder.tell }
        _ = try second.request(DownloadRequest(url: Self.url))
        try await withTimeout(20) { await next.waitForStarts(1) }
        #expect(next.transfer(0).respond(206, ["Content-Range": "bytes 10000-39999/40000", "ETag": "\"v1\""]))
        try next.transfer(0).send(Array(body[10_000...]))
        next.transfer(0).finish()
        let story = try await recorder.wait(for: paused.snapshot.id) { $0.isEnd }
        #expect(story.map(\.name) == ["resumed", "attempt_started", "head_received", "completed"])
        guard case .completed(_, _, let seconds, _, let attempts, let refetched)? = story.last else {
            Issue.record("\(story)")
            return
        }
        #expect(seconds < 60 && attempts == 1 && refetched == 0, "the run began when it was resumed: \(story)")
        await second.shutdown()
    }

    @Test func causesOfTroubleArePlainWords() {
        #expect(StoryFacts.snakeCase("connectTimeout") == "connect_timeout")
        #expect(StoryFacts.snakeCase("connection") == "connection")
        let incomplete = StoryFacts.trouble(.ended(AttemptEnd()), refusal: nil,
                                            result: .success(TransferSummary(head: ResponseHead(status: 200, headers: [:], effectiveURL: ""),
                                                                             bodyBytes: 10)))
        #expect(incomplete?.cause == "incomplete")
        #expect(StoryFacts.trouble(.ended(AttemptEnd()), refusal: .restart("206 for a different ETag"),
                                   result: .failure(TransferFailure(.rejected, "x"))) == .init(cause: "restart", message: "206 for a different ETag"))
        #expect(StoryFacts.trouble(.published, refusal: nil, result: .failure(TransferFailure(.rejected, "x"))) == nil)
    }
}
