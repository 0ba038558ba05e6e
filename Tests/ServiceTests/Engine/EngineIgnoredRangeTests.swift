import Foundation
import Testing
@testable import DownloaderEngine

/// An origin that ignores `Range` answers a resume with `200` and the whole file. Under the kept
/// version's strong ETag, that is the kept bytes again and the rest: the kept bytes stay (checked
/// against what the answer repeats of them, then skipped), the download goes on, and nothing says
/// the file changed. Other bytes under that tag, or another tag, start over from 0.
@Suite struct EngineIgnoredRangeTests {
    @Test func aWholeAnswerOfTheKeptVersionGoesOnAfterTheKeptBytes() async throws {
        let origin = try TestOrigin(bodySize: 300_000)
        defer { origin.stop() }
        origin.update { $0.ignoreRanges = true }
        origin.inject(.cut(afterBodyBytes: 100_000))
        let engine = try EngineLiveTests.engine()
        let (r, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        let asked = origin.requests(path: "/file")
        #expect(asked.count == 2 && asked[1].header("Range") == "bytes=100000-" && asked[1].header("If-Range") == origin.etag())
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        #expect(engine.statistics.restarts == 0 && engine.statistics.resumes == 1)
        #expect(done.changedAt == nil && !engine.changed(id: r.snapshot.id, within: 600))
        await engine.shutdown()
    }

    /// While the answer repeats the kept bytes, the ETA counts them too: the rate is what arrives,
    /// and what is still to arrive is the rest of the repeat as well as the rest of the file.
    @Test func theETAWhileSkippingCountsTheBytesStillRepeated() async throws {
        let (total, kept) = (6 << 20, 3 << 20)
        let origin = try TestOrigin(bodySize: total)
        defer { origin.stop() }
        // The repeat takes 1 s: progress (every 0.05 s) and its rate are seen during it also on a loaded host.
        origin.update { $0.ignoreRanges = true; $0.bytesPerSecond = 3 << 20 }
        origin.inject(.cut(afterBodyBytes: kept))
        let engine = try EngineLiveTests.engine()
        let r = try engine.request(DownloadRequest(url: origin.url))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        let events = try await withTimeout(60) { await EngineFixture.events(sub) { $0.isTerminal } }
        #expect(events.last?.snapshot.state == .completed)
        #expect(origin.requests(path: "/file").count == 2 && engine.statistics.restarts == 0)
        // Progress with the file at `kept`: the first answer's last, then the second's while it
        // repeated the kept bytes (more to come than the rest of the file), and at the repeat's end.
        let toCome = events.compactMap { event -> Double? in
            guard case .progress(let s) = event, s.bytesWritten == Int64(kept), let eta = s.etaSeconds else { return nil }
            return eta * s.bytesPerSecond
        }
        #expect(toCome.allSatisfy { $0 >= Double(total - kept) - 1 })
        #expect(toCome.contains { $0 > Double(total - kept) + 1 }, "the repeat not counted: \(toCome)")
        await engine.shutdown()
    }

    /// The whole answer is longer than the file's limit less the kept bytes, and the file is
    /// within it: it completes (the answer's body was held to the limit less the kept bytes).
    @Test func aWholeAnswerOfTheKeptVersionWithinTheSizeLimitCompletes() async throws {
        let origin = try TestOrigin(bodySize: 300_000)
        defer { origin.stop() }
        origin.update { $0.ignoreRanges = true }
        origin.inject(.cut(afterBodyBytes: 100_000))
        let engine = try EngineLiveTests.engine { $0.maxFileSize = 300_000 }
        let (r, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        #expect(engine.statistics.restarts == 0)
        await engine.shutdown()
    }

    /// Asked with more connections, a resume answered whole plans no pieces: the origin ignores
    /// `Range` (its `Accept-Ranges` notwithstanding), so the kept bytes stay and one connection ends it.
    @Test func aWholeAnswerToAResumePlansNoPieces() async throws {
        let origin = try TestOrigin(bodySize: 24 << 20)
        defer { origin.stop() }
        let engine = try EngineLiveTests.engine { $0.maxConnectionsPerDownload = 4; $0.segmentProbeSeconds = 0 }
        let (id, kept) = try await EngineLiveTests.pauseMidway(engine, stalling: origin, url: origin.url)
        #expect(kept > 0)
        origin.update { $0.ignoreRanges = true; $0.advertiseIgnoredRanges = true }
        let again = try engine.request(DownloadRequest(url: origin.url, connections: 4))
        let done = try await EngineLiveTests.finish(engine, again.snapshot.id)
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, id) == origin.expectedBody())
        let asked = origin.requests(path: "/file")
        #expect(asked.count == 2 && asked[1].header("Range") == "bytes=\(kept)-", "\(asked.map { $0.header("Range") ?? "-" })")
        #expect(engine.statistics.restarts == 0 && done.changedAt == nil)
        await engine.shutdown()
    }

    /// A whole answer of other bytes, under the kept ETag (an origin whose tag lies) or under
    /// another (a new version): the file starts over from 0, asked again once the restart is recorded.
    @Test(arguments: [true, false])
    func aWholeAnswerOfOtherBytesStartsOver(keepingTheTag: Bool) async throws {
        let origin = try TestOrigin(bodySize: 2_000_000)
        defer { origin.stop() }
        let engine = try EngineLiveTests.engine()
        let (id, kept) = try await EngineLiveTests.pauseMidway(engine, stalling: origin, url: origin.url)
        #expect(kept > 0)
        let etag = origin.etag()
        origin.update { $0.ignoreRanges = true }
        if keepingTheTag { origin.changeBytesKeepingValidators() } else { origin.changeVersion() }
        #expect((origin.etag() == etag) == keepingTheTag)
        let (_, done) = try await EngineLiveTests.requestAgain(engine, origin.url, id: id)
        #expect(done.state == .completed, "\(String(describing: done.error))")
        #expect(try EngineLiveTests.stored(engine, id) == origin.expectedBody())
        let asked = origin.requests(path: "/file")
        #expect(asked.contains { $0.header("If-Range") == etag } && asked.last?.header("Range") == nil)
        #expect(engine.statistics.restarts == 1)
        #expect(done.changedAt != nil)
        await engine.shutdown()
    }
}
