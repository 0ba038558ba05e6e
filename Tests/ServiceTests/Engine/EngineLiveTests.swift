import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// The engine with the real libcurl driver against the in-process `TestOrigin`.
@Suite struct EngineLiveTests {
    static func engine(_ root: URL = EngineFixture.root(), configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        var c = EngineFixture.configuration(root)
        c.progressInterval = 0.05
        configure(&c)
        return try DownloadEngine(configuration: c, driver: CurlTransferDriver(), scheduler: EagerScheduler(),
                                  diskPressure: .disabled)
    }

    static func finish(_ engine: DownloadEngine, _ id: String) async throws -> DownloadSnapshot {
        try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
    }

    /// Requests `request` and waits (20 s at most, like `finish`) until its download completes or fails.
    static func fetch(_ engine: DownloadEngine, _ request: DownloadRequest) async throws -> (Enqueued, DownloadSnapshot) {
        try await EngineFixture.requestAndWait(engine, request, until: [.completed, .failed], timeout: 20)
    }

    /// Asks for `url` again (joining download `id`, paused or running), then waits like `finish`
    /// until `id` ends.
    static func requestAgain(_ engine: DownloadEngine, _ url: String, id: String) async throws -> (again: Enqueued, done: DownloadSnapshot) {
        let again = try engine.request(DownloadRequest(url: url))
        return (again, try await finish(engine, id))
    }

    static func stored(_ engine: DownloadEngine, _ id: String) throws -> [UInt8] {
        let file = try #require(engine.completedFile(id: id))
        return Array(try Data(contentsOf: URL(fileURLWithPath: file.path)))
    }

    /// Starts a download, waits for at least `atLeast` bytes, then the only caller cancels.
    /// With a `TestOrigin`, the origin stalls after exactly `atLeast` bytes so the pause lands there
    /// however slow the machine is. Returns the settled partial size.
    static func pauseMidway(_ engine: DownloadEngine, stalling origin: TestOrigin? = nil, url: String,
                            atLeast: Int64 = 50_000) async throws -> (id: String, kept: Int64) {
        if let origin {
            origin.update { $0.stallBound = 60 }
            origin.inject(.stall(afterBodyBytes: Int(atLeast)))
        }
        let r = try engine.request(DownloadRequest(url: url))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        _ = try await withTimeout(20) {
            await EngineFixture.events(sub) { $0.snapshot.bytesWritten >= atLeast || $0.isTerminal }
        }
        let event = try await EngineFixture.cancelAndSettle(engine, token: r.token, id: r.snapshot.id)
        guard case .paused(let paused) = event else {
            Issue.record("expected a pause, got \(event)")
            throw TimeoutError(seconds: 0)
        }
        let partial = engine.configuration.stateDirectory.appendingPathComponent("partials/\(r.snapshot.id).part").path
        let kept = paused.bytesWritten
        if kept > 0 { #expect(FileStore.fileSize(partial) == kept) }
        return (r.snapshot.id, kept)
    }

    @Test func byteIdenticalDownload() async throws {
        let origin = try TestOrigin(bodySize: 3 * 1024 * 1024 + 5)
        defer { origin.stop() }
        let engine = try Self.engine()
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed)
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        #expect(done.sha256 == SHA256Hasher.hex(origin.expectedBody()))
        #expect(done.fileName == "file")
        #expect(origin.getCount() == 1)
        #expect(engine.statistics.completions == 1 && engine.statistics.failures.isEmpty)
        await engine.shutdown()
    }

    @Test func thousandSimultaneousRequestsMakeOneUpstreamGET() async throws {
        let origin = try TestOrigin(bodySize: 500_000)
        defer { origin.stop() }
        let engine = try Self.engine()
        let url = origin.url
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<1000 { group.addTask { try engine.request(DownloadRequest(url: url)).snapshot.id } }
            var all = Set<String>()
            for try await id in group { all.insert(id) }
            return all
        }
        #expect(ids.count == 1)
        let done = try await Self.finish(engine, try #require(ids.first))
        #expect(done.state == .completed && done.callers == 1000)
        #expect(origin.getCount() == 1)
        await engine.shutdown()
    }

    @Test func cutAtByteKResumesWithExactRangeAndIfRange() async throws {
        let origin = try TestOrigin(bodySize: 1_000_000)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 123_457))
        let engine = try Self.engine()
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        let requests = origin.requests(path: "/file")
        #expect(requests.count == 2)
        #expect(requests[1].header("Range") == "bytes=123457-")
        #expect(requests[1].header("If-Range") == origin.etag())
        await engine.shutdown()
    }

    /// A link that drops every 1.5 MiB: each attempt keeps more than 1 MiB, so `maxAttempts`
    /// (3 here) counts attempts in a row without progress, and the 8 MiB file completes (it failed
    /// with retries_exhausted after 3 attempts and 4.5 MiB).
    @Test func attemptsThatProgressDoNotUseUpTheRetries() async throws {
        let origin = try TestOrigin(bodySize: 8 << 20)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 3 << 19), times: 10)
        let engine = try Self.engine { $0.maxAttempts = 3 }
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        #expect(origin.requests(path: "/file").count == 6)
        await engine.shutdown()
    }

    @Test func pauseByLastCancelThenResumeFromKeptOffset() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        let engine = try Self.engine()
        let (id, kept) = try await Self.pauseMidway(engine, stalling: origin, url: origin.url)
        #expect(kept == 50_000)
        let (again, done) = try await Self.requestAgain(engine, origin.url, id: id)
        #expect(again.snapshot.id == id)
        #expect(done.state == .completed)
        let last = try #require(origin.requests(path: "/file").last)
        #expect(last.header("Range") == "bytes=\(kept)-")
        #expect(last.header("If-Range") == origin.etag())
        #expect(try Self.stored(engine, id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func versionChangeRestartsAndStoresTheNewVersion() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        let engine = try Self.engine()
        let (id, kept) = try await Self.pauseMidway(engine, stalling: origin, url: origin.url)
        #expect(kept > 0)
        let oldETag = origin.etag()
        origin.changeVersion()
        let sub = try #require(engine.subscribe(id: id))
        _ = try engine.request(DownloadRequest(url: origin.url))
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        #expect(events.contains { if case .resumed(0, true, _) = $0 { return true } else { return false } })
        #expect(events.last?.snapshot.state == .completed)
        // Every later snapshot says the file changed, for a reader that missed the event.
        #expect(events.first?.snapshot.changedAt == nil)
        #expect(events.last?.snapshot.changedAt != nil)
        // The resume named the old version; the new one was asked for again from 0 once the
        // restart was recorded.
        let asked = origin.requests(path: "/file")
        #expect(asked.contains { $0.header("If-Range") == oldETag } && asked.last?.header("Range") == nil)
        #expect(try Self.stored(engine, id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func weakETagResumesWithoutRange() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        origin.update { $0.validators = .weakETag }
        let engine = try Self.engine()
        let (id, kept) = try await Self.pauseMidway(engine, stalling: origin, url: origin.url)
        #expect(kept == 0)
        #expect(engine.snapshot(id: id)?.resumable == false)
        let (_, done) = try await Self.requestAgain(engine, origin.url, id: id)
        #expect(done.state == .completed)
        for request in origin.requests(path: "/file") {
            #expect(request.header("Range") == nil)
            #expect(request.header("If-Range") == nil)
        }
        #expect(try Self.stored(engine, id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func lastModifiedOnlyResume() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        origin.update { $0.validators = .lastModifiedOnly }
        let engine = try Self.engine()
        let (id, kept) = try await Self.pauseMidway(engine, stalling: origin, url: origin.url)
        #expect(kept > 0)
        let (_, done) = try await Self.requestAgain(engine, origin.url, id: id)
        #expect(done.state == .completed)
        let last = try #require(origin.requests(path: "/file").last)
        #expect(last.header("Range") == "bytes=\(kept)-")
        #expect(last.header("If-Range") == origin.lastModified())
        #expect(try Self.stored(engine, id) == origin.expectedBody())
        await engine.shutdown()
    }

    /// Segments ask for ranges; an origin that claims ranges but answers them with the whole body
    /// (200) is judged by the engine (the segments are abandoned, the download restarts on one
    /// connection), not refused by the driver as a body larger than the segment (`too_large`).
    @Test func segmentsAnsweredWithWholeBodiesRestartOnOneConnection() async throws {
        let origin = try TestOrigin(bodySize: 24 << 20)
        defer { origin.stop() }
        origin.update { $0.ignoreRanges = true; $0.advertiseIgnoredRanges = true; $0.bytesPerSecond = 16 << 20 }
        let engine = try Self.engine { $0.maxConnectionsPerDownload = 2 }
        let (r, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: origin.url, connections: 2),
                                                               until: [.completed, .failed], timeout: 60)
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(origin.requests(path: "/file").contains { $0.header("Range") != nil }, "a segment asked for a range")
        if done.state == .completed { #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody()) }
        await engine.shutdown()
    }

    @Test func wrongContentRangeIsNeverSpliced() async throws {
        let origin = try TestOrigin(bodySize: 300_000)
        defer { origin.stop() }
        origin.update { $0.wrongContentRangeStart = true }
        origin.inject(.cut(afterBodyBytes: 100_000))
        let engine = try Self.engine()
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed)
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        // The resume's 206 starting a byte early is refused and the file fetched again from 0: one restart.
        let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
        #expect(gets.map { $0.header("Range") } == [nil, "bytes=100000-", nil], "\(gets.map { $0.header("Range") ?? "-" })")
        #expect(gets.count == 3 && gets[1].header("If-Range") == origin.etag())
        #expect(engine.statistics.restarts == 1)
        await engine.shutdown()
    }

    /// An origin that answers at most 80 000 bytes of a range: each short 206 of the same version
    /// is kept and the rest asked for from where it ended (none is thrown away, nothing published short).
    @Test func shortRangesOfTheSameVersionAreKeptAndContinued() async throws {
        let origin = try TestOrigin(bodySize: 300_000)
        defer { origin.stop() }
        origin.update { $0.maxRangeLength = 80_000 }
        origin.inject(.cut(afterBodyBytes: 100_000))
        let engine = try Self.engine { $0.maxAttempts = 2 }  // Short answers that brought bytes are not failed attempts.
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        let ranges = origin.requests(path: "/file").filter { $0.method == "GET" }.map { $0.header("Range") ?? "-" }
        #expect(ranges == ["-", "bytes=100000-", "bytes=180000-", "bytes=260000-"])
        await engine.shutdown()
    }

    @Test func redirectedDownloadKeepsTheFinalHopsValidator() async throws {
        let origin = try TestOrigin(bodySize: 400_000)
        defer { origin.stop() }
        origin.redirect(from: "/a", to: "/b")
        origin.redirect(from: "/b", to: "/file", status: 307)
        origin.inject(.cut(afterBodyBytes: 70_000))
        let engine = try Self.engine()
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url("/a")))
        #expect(done.state == .completed)
        let finals = origin.requests(path: "/file")
        #expect(finals.count == 2)
        #expect(finals[1].header("If-Range") == origin.etag())
        #expect(finals[1].header("Range") == "bytes=70000-")
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func notFoundFailsAtOnceWithoutStoring() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let engine = try Self.engine()
        let (_, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url("/nope")))
        #expect(done.state == .failed && done.error?.code == .httpError && done.error?.httpStatus == 404)
        #expect(origin.requests(path: "/nope").count == 1)
        #expect(engine.statistics.failures == [.httpError: 1] && engine.statistics.completions == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: engine.configuration.cacheDirectory.path).isEmpty)
        await engine.shutdown()
    }

    @Test func notFoundLargerThanTheSizeLimitIsAnHTTPErrorNotTooLarge() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let engine = try Self.engine { $0.maxFileSize = 4 }  // "not found\n" is 10 bytes.
        let (_, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url("/nope")))
        #expect(done.state == .failed && done.error?.code == .httpError && done.error?.httpStatus == 404)
        #expect(origin.requests(path: "/nope").count == 1)
        await engine.shutdown()
    }

    @Test func redirectToFTPFailsAtOnceAsUnsupportedRedirect() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        origin.redirect(from: "/ftp", to: "ftp://127.0.0.1:\(origin.port)/file")
        let engine = try Self.engine()
        let (_, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url("/ftp")))
        #expect(done.state == .failed && done.error?.code == .unsupportedRedirect)
        #expect(origin.requests(path: "/ftp").count == 1)  // Not retried.
        await engine.shutdown()
    }

    /// With no wait for space allowed (`diskFullWait` 0; `EngineSpaceWaitTests` for the wait).
    @Test func noSpaceWhileWritingFailsAsDiskFullAndKeepsTheWrittenBytesForLater() async throws {
        let origin = try TestOrigin(bodySize: 3 * 1024 * 1024)
        defer { origin.stop() }
        let engine = try Self.engine { $0.diskFullWait = 0 }
        // The disk "fills" after 1.5 MiB: a short write, then ENOSPC (injected at the write seam).
        let budget = 1_572_864
        let written = OriginLock(0)
        let full = OriginLock(true)
        engine.core.locked {
            engine.core.hooks.partialWrite = { fd, base, count, at in
                guard full.withLock({ $0 }) else { return Glibc.pwrite(fd, base, count, at) }
                return written.withLock { total -> Int in
                    let allowed = min(count, budget - total)
                    guard allowed > 0 else {
                        errno = ENOSPC
                        return -1
                    }
                    let n = Glibc.pwrite(fd, base, allowed, at)  // A short direct call is refused: not counted.
                    total += max(0, n)
                    return n
                }
            }
        }
        let (r, failed) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(failed.state == .failed && failed.error?.code == .diskFull)
        #expect(origin.getCount() == 1)  // Not retried.
        let partial = engine.configuration.stateDirectory.appendingPathComponent("partials/\(r.snapshot.id).part").path
        let onDisk = try #require(FileStore.fileSize(partial))
        #expect(onDisk == Int64(budget))
        #expect(failed.bytesWritten <= onDisk)
        #expect(try #require(try StateFixture.stored(engine).first { $0.id == r.snapshot.id }).verifiedOffset <= onDisk)
        // Space is back: a new request resumes from the kept bytes and completes byte-identical.
        full.withLock { $0 = false }
        let (_, done) = try await Self.requestAgain(engine, origin.url, id: r.snapshot.id)
        #expect(done.state == .completed)
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        let second = try #require(origin.requests(path: "/file").last)
        #expect(second.header("Range") == "bytes=\(onDisk)-")
        await engine.shutdown()
    }

    @Test func serverErrorsWithRetryAfterAreRetried() async throws {
        let origin = try TestOrigin(bodySize: 100_000)
        defer { origin.stop() }
        origin.inject(.status(500, retryAfter: nil))
        origin.inject(.status(429, retryAfter: "0"))
        origin.inject(.status(503, retryAfter: "1"))
        let engine = try Self.engine { $0.retryMaxDelay = 0.2 }
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed)
        #expect(origin.getCount() == 4)
        #expect(engine.statistics.retries == 3)
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func stallReconnectsAndResumes() async throws {
        let origin = try TestOrigin(bodySize: 200_000)
        defer { origin.stop() }
        origin.inject(.stall(afterBodyBytes: 60_000))
        let engine = try Self.engine { $0.stallTimeout = 1 }
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed)
        let requests = origin.requests(path: "/file")
        #expect(requests.count == 2)
        #expect(requests[1].header("Range") == "bytes=60000-")
        #expect(try Self.stored(engine, r.snapshot.id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func checksumMismatchFails() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        defer { origin.stop() }
        let engine = try Self.engine()
        let (r, done) = try await Self.fetch(engine, DownloadRequest(url: origin.url, sha256: String(repeating: "ab", count: 32)))
        #expect(done.state == .failed && done.error?.code == .checksumMismatch)
        #expect(engine.completedFile(id: r.snapshot.id) == nil)
        await engine.shutdown()
    }

    @Test func restartedEngineResumesAPausedDownload() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        let root = EngineFixture.root()
        let first = try Self.engine(root)
        let (id, kept) = try await Self.pauseMidway(first, stalling: origin, url: origin.url)
        #expect(kept > 0)
        await first.shutdown()
        let second = try Self.engine(root)
        let restored = try #require(second.snapshot(id: id))
        #expect(restored.state == .paused && restored.bytesWritten == kept && restored.resumable)
        let (again, done) = try await Self.requestAgain(second, origin.url, id: id)
        #expect(again.snapshot.id == id)
        #expect(done.state == .completed)
        #expect(origin.requests(path: "/file").last?.header("Range") == "bytes=\(kept)-")
        #expect(try Self.stored(second, id) == origin.expectedBody())
        await second.shutdown()
    }

    @Test func runningDownloadCarriesOnAfterRestart() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        let root = EngineFixture.root()
        let first = try Self.engine(root)
        origin.update { $0.stallBound = 60 }
        origin.inject(.stall(afterBodyBytes: 100_000))
        let r = try first.request(DownloadRequest(url: origin.url))
        let sub = try #require(first.subscribe(id: r.snapshot.id))
        _ = try await withTimeout(20) { await EngineFixture.events(sub) { $0.snapshot.bytesWritten >= 100_000 } }
        await first.shutdown()
        let second = try Self.engine(root)
        #expect(second.recovery.resumed == 1)
        let done = try await Self.finish(second, r.snapshot.id)
        #expect(done.state == .completed)
        #expect(try Self.stored(second, r.snapshot.id) == origin.expectedBody())
        let last = try #require(origin.requests(path: "/file").last)
        #expect(last.header("If-Range") == origin.etag())
        #expect(last.header("Range") == "bytes=100000-")
        await second.shutdown()
    }
}
