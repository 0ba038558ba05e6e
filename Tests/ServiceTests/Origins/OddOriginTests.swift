import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Origins that bend HTTP, fetched by the engine with the libcurl driver (`TestOrigin` on loopback):
/// coding the client did not ask for, no length, lengths that lie, RFC 8187 names, totals that change,
/// redirect loops, and servers that are slow or silent.
@Suite(.timeLimit(.minutes(2)))
struct OddOriginTests {
    static func engine(_ configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> DownloadEngine {
        try EngineLiveTests.engine(configure: configure)
    }

    static func fetch(_ engine: DownloadEngine, _ url: String) async throws -> DownloadSnapshot {
        try await EngineLiveTests.fetch(engine, DownloadRequest(url: url)).1
    }

    static func partialExists(_ engine: DownloadEngine, _ id: String) -> Bool {
        FileManager.default.fileExists(atPath: engine.configuration.stateDirectory.appendingPathComponent("partials/\(id).part").path)
    }

    @Test func gzipSentUnaskedIsStoredAsSent() async throws {
        let origin = try TestOrigin(bodySize: 70_000)
        defer { origin.stop() }
        origin.update { $0.contentEncoding = "gzip" }
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .completed)
        #expect(done.size == 70_000)  // What was received: the sizes compared are the coded ones.
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        let request = try #require(origin.requests(path: "/file").first)
        #expect(request.header("accept-encoding") == nil)
        await engine.shutdown()
    }

    @Test func aChunkedBodyWithoutContentLength() async throws {
        let origin = try TestOrigin(bodySize: 300_001)
        defer { origin.stop() }
        origin.update { $0.chunked = true }
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        await engine.shutdown()
    }

    @Test func aBodyShorterThanItsContentLengthIsACutAndAnOriginThatAlwaysLiesEndsFailed() async throws {
        let origin = try TestOrigin(bodySize: 50_000)
        defer { origin.stop() }
        origin.update { $0.contentLengthDelta = 1000 }
        let engine = try Self.engine { $0.maxAttempts = 3 }
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .failed)
        #expect(done.error?.code == .retriesExhausted, "\(String(describing: done.error))")
        #expect(origin.getCount() == 3)
        // The second attempt resumed after the 50 000 bytes it had, as for any cut.
        #expect(origin.requests(path: "/file").dropFirst().first?.header("range") == "bytes=50000-")
        await engine.shutdown()
    }

    /// A body in a coding nobody asked for is not resumed: after a cut it is fetched again whole,
    /// without `Range` (a server may answer a range in another coding under the same tag).
    @Test func aCodedBodyCutIsFetchedAgainWholeNotResumed() async throws {
        let origin = try TestOrigin(bodySize: 70_000)
        defer { origin.stop() }
        origin.update { $0.contentEncoding = "gzip" }
        origin.inject(.cut(afterBodyBytes: 20_000))
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .completed && done.size == 70_000)
        let gets = origin.requests().filter { $0.method == "GET" }
        #expect(gets.count == 2 && gets.allSatisfy { $0.header("range") == nil }, "\(gets.map { $0.header("range") ?? "-" })")
        await engine.shutdown()
    }

    @Test func aBodyShorterOnceIsResumed() async throws {
        let origin = try TestOrigin(bodySize: 50_000)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 20_000))  // Content-Length 50 000, 20 000 bytes, then the close.
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        #expect(origin.requests(path: "/file").map { $0.header("range") } == [nil, "bytes=20000-"])
        await engine.shutdown()
    }

    @Test func aBodyLongerThanItsContentLengthFailsAtOnceAndKeepsNothing() async throws {
        let origin = try TestOrigin(bodySize: 50_000)
        defer { origin.stop() }
        origin.update { $0.contentLengthDelta = -100 }
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .failed)
        #expect(done.error?.code == .contentLengthMismatch, "\(String(describing: done.error))")
        #expect(done.error?.message == "the origin sent more than the 49900 bytes its Content-Length announced")
        #expect(origin.getCount() == 1)
        #expect(engine.completedFile(id: done.id) == nil)
        #expect(!Self.partialExists(engine, done.id))
        #expect(done.bytesWritten == 0)
        await engine.shutdown()
    }

    /// A chunked `206` has no Content-Length to stop it: its Content-Range does. One that runs on
    /// past it fails as a body longer than its Content-Length does, keeping nothing.
    @Test func aChunkedRangeAnswerLongerThanItsContentRangeFailsAndKeepsNothing() async throws {
        let origin = try TestOrigin(bodySize: 50_000)
        defer { origin.stop() }
        origin.update {
            $0.chunked = true
            $0.maxRangeLength = 10_000
            $0.rangeOverrun = 1_000
        }
        origin.inject(.cut(afterBodyBytes: 5_000))  // The first answer is cut: the next is a resume.
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .failed)
        #expect(done.error?.code == .contentLengthMismatch, "\(String(describing: done.error))")
        #expect(done.error?.message == "the origin sent more than the 10000 bytes its Content-Range announced")
        #expect(origin.getCount() == 2 && origin.requests().last?.header("range") == "bytes=5000-")
        #expect(engine.completedFile(id: done.id) == nil && !Self.partialExists(engine, done.id) && done.bytesWritten == 0)
        await engine.shutdown()
    }

    @Test func anRFC8187FileNameIsDecodedAndSanitised() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        origin.update { $0.contentDisposition = #"attachment; filename="plain.txt"; filename*=UTF-8''%E2%82%AC%20rates%2F..%2Fx.txt"# }
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .completed)
        #expect(done.fileName == "€ rates_._x.txt")
        let stored = try #require(engine.completedFile(id: done.id))
        #expect(stored.path.hasSuffix("€ rates_._x.txt"), "\(stored.path)")
        await engine.shutdown()
    }

    @Test func aTotalThatChangesBetweenAttemptsRestartsFromZero() async throws {
        let origin = try TestOrigin(bodySize: 400_000)
        defer { origin.stop() }
        // Same ETag, another total: a new version in disguise.
        origin.inject(.resize(afterBodyBytes: 100_000, to: 300_000))
        let engine = try Self.engine()
        let done = try await Self.fetch(engine, origin.url)
        #expect(done.state == .completed)
        #expect(done.size == 300_000)
        #expect(try EngineLiveTests.stored(engine, done.id) == origin.expectedBody())
        let ranges = origin.requests(path: "/file").map { $0.header("range") }
        #expect(ranges == [nil, "bytes=100000-", nil], "\(ranges)")
        await engine.shutdown()
    }

    @Test func aRedirectLoopFailsWithoutRetrying() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        origin.redirect(from: "/a", to: "/b")
        origin.redirect(from: "/b", to: "/a")
        let engine = try Self.engine { $0.maxRedirects = 5 }
        let done = try await Self.fetch(engine, origin.url("/a"))
        #expect(done.state == .failed)
        #expect(done.error?.code == .tooManyRedirects, "\(String(describing: done.error))")
        #expect(origin.getCount(path: "/a") + origin.getCount(path: "/b") == 6)
        await engine.shutdown()
    }

    @Test func aServerThatAcceptsAndNeverAnswersEndsWithHeadTimeout() async throws {
        let listener = try RawListener(.neverAnswer)
        defer { listener.stop() }
        let engine = try Self.engine {
            $0.maxAttempts = 2
            $0.headTimeout = 0.5
        }
        let done = try await Self.fetch(engine, "http://127.0.0.1:\(listener.port)/file")
        #expect(done.state == .failed)
        #expect(done.error?.code == .headTimeout, "\(String(describing: done.error))")
        #expect(done.error?.message == "gave up after 2 attempts: no response head from 127.0.0.1 within 0.5 s of sending the request")
        #expect(listener.connectionCount == 2)
        await engine.shutdown()
    }

    @Test func aConnectThatNeverCompletesEndsWithConnectTimeout() async throws {
        // A listener that never accepts, its queue full: a connect hangs (all on loopback).
        let (port, descriptors) = try OriginSocket.silentListenerWithFullQueue()
        defer { descriptors.forEach { close($0) } }
        let engine = try Self.engine {
            $0.maxAttempts = 2
            $0.connectTimeout = 0.3
        }
        let done = try await Self.fetch(engine, "http://127.0.0.1:\(port)/file")
        #expect(done.state == .failed)
        #expect(done.error?.code == .connectTimeout, "\(String(describing: done.error))")
        #expect(engine.statistics.retries == 1)
        await engine.shutdown()
    }
}
