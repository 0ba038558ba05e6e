import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Content-addressed reuse (`"sha256"`) and ignored query parameters (issue 15), in the engine.
@Suite struct EngineReuseTests {
    static let body = EngineFixture.body(3_000)
    static let digest = SHA256Hasher.hex(body)

    /// An engine whose origin answers every request with `body`.
    func engine(_ configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> (DownloadEngine, FakeTransferDriver) {
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["ETag": "\"e\""], body: Self.body) }
        return (try EngineFixture.engine(EngineFixture.root(), driver: driver, configure: configure), driver)
    }

    @Test func aStoredDigestAnswersAnotherURLWithoutTheOrigin() async throws {
        let (engine, driver) = try engine()
        let (first, stored) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://a.test/x"), until: [.completed])
        #expect(stored.sha256 == Self.digest)
        let reused = try engine.request(DownloadRequest(url: "http://mirror.test/y", sha256: Self.digest.uppercased()))
        #expect(reused.reused && reused.snapshot.id == first.snapshot.id && reused.snapshot.state == .completed)
        #expect(driver.startCount == 1)
        // The new URL is not recorded: asked without the digest, it is a download of its own.
        #expect(engine.list().count == 1)
        #expect(engine.isCaller(token: reused.token, of: first.snapshot.id))
        let plain = try engine.request(DownloadRequest(url: "http://mirror.test/y"))
        #expect(!plain.reused && plain.snapshot.id != first.snapshot.id)
        await engine.shutdown()
    }

    /// Reuse looks the digest up (`completedBySHA256`): a download restored at start-up is found,
    /// a removed one no longer is.
    @Test func aDigestIsFoundAfterARestartAndNotAfterARemoval() async throws {
        let root = EngineFixture.root()
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["ETag": "\"e\""], body: Self.body) }
        let engine = try EngineFixture.engine(root, driver: driver)
        let (first, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://a.test/x"), until: [.completed])
        await engine.shutdown()
        let again = try EngineFixture.engine(root, driver: driver)
        let reused = try again.request(DownloadRequest(url: "http://mirror.test/y", sha256: Self.digest))
        #expect(reused.reused && reused.snapshot.id == first.snapshot.id && driver.startCount == 1)
        #expect(again.remove(id: first.snapshot.id) != nil)
        let fetched = try again.request(DownloadRequest(url: "http://mirror.test/z", sha256: Self.digest))
        #expect(!fetched.reused && fetched.snapshot.id != first.snapshot.id)
        await again.shutdown()
    }

    /// A URL whose stored file has another digest than asked: a stored file of the digest asked
    /// answers (the contract's reuse), not the conflict with the URL's own file; without one, the
    /// conflict stands.
    @Test func aStoredDigestAnswersAlsoForAURLStoredWithAnotherDigest() async throws {
        let other = EngineFixture.body(2_000)
        let driver = FakeTransferDriver { request, _ in
            .init(status: 200, headers: ["ETag": "\"e\""], body: request.url.contains("other") ? other : Self.body)
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let (first, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://a.test/x"), until: [.completed])
        let (second, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://other.test/y"), until: [.completed])
        let reused = try engine.request(DownloadRequest(url: "http://other.test/y", sha256: Self.digest))
        #expect(reused.reused && reused.snapshot.id == first.snapshot.id && reused.snapshot.id != second.snapshot.id)
        #expect(driver.startCount == 2, "the origin is not asked again")
        #expect(throws: EngineError.self) {
            try engine.request(DownloadRequest(url: "http://other.test/y", sha256: String(repeating: "0", count: 64)))
        }
        let own = try engine.request(DownloadRequest(url: "http://other.test/y", sha256: SHA256Hasher.hex(other)))
        #expect(!own.reused && own.snapshot.id == second.snapshot.id, "its own digest: its own file")
        await engine.shutdown()
    }

    /// A stored file that changed on disk (another size) is not the one verified: nothing is
    /// answered from it; the stored download fails (as its file route would find) and the new URL
    /// is fetched.
    @Test func aStoredFileThatChangedOnDiskIsNotReused() async throws {
        let (engine, driver) = try engine()
        let (first, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://a.test/x"), until: [.completed])
        let path = try #require(engine.completedFile(id: first.snapshot.id)).path
        #expect(truncate(path, 10) == 0)
        let asked = try engine.request(DownloadRequest(url: "http://mirror.test/y", sha256: Self.digest))
        #expect(!asked.reused && asked.snapshot.id != first.snapshot.id && asked.snapshot.state != .completed)
        let failed = try #require(engine.snapshot(id: first.snapshot.id))
        #expect(failed.state == .failed && failed.error?.code == .diskError, "\(failed)")
        #expect(try StateFixture.stored(engine).first { $0.id == first.snapshot.id }?.state == .failed, "stored so")
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: asked.snapshot.id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == Self.digest)
        #expect(driver.startCount == 2)
        await engine.shutdown()
    }

    @Test func reuseAnswersWhileTheNewURLIsDownloadingElsewhereAndMovesToPersistent() async throws {
        let held = FakeTransferDriver { request, _ in
            request.url.contains("slow") ? nil : .init(status: 200, headers: [:], body: Self.body)
        }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: held)
        let (first, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://a.test/x"), until: [.completed])
        let running = try engine.request(DownloadRequest(url: "http://slow.test/y"))
        try await withTimeout(20) { await held.waitForStarts(2) }
        let reused = try engine.request(DownloadRequest(url: "http://slow.test/y", storage: .persistent, sha256: Self.digest))
        #expect(reused.reused && reused.snapshot.id == first.snapshot.id && reused.snapshot.id != running.snapshot.id)
        #expect(reused.snapshot.storage == .persistent)
        let moved = try await withTimeout(20) { () async throws -> CompletedFile in
            while true {
                if let file = engine.completedFile(id: first.snapshot.id), file.path.hasPrefix(engine.configuration.dataDirectory.path) {
                    return file
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: moved.path)) == Data(Self.body))
        await engine.shutdown()
    }

    @Test func reuseOnlyAmongFilesFetchedWithoutHeadersOrWithTheSame() async throws {
        let (engine, driver) = try engine()
        let secret = ["Authorization": "Bearer one"]
        let (privateOne, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://a.test/p", headers: secret),
                                                                     until: [.completed])
        // No headers: the private file is not offered.
        let bare = try engine.request(DownloadRequest(url: "http://b.test/q", sha256: Self.digest))
        #expect(!bare.reused && bare.snapshot.id != privateOne.snapshot.id)
        let other = try engine.request(DownloadRequest(url: "http://c.test/r", sha256: Self.digest, headers: ["Authorization": "Bearer two"]))
        #expect(!other.reused || other.snapshot.id != privateOne.snapshot.id)
        let same = try engine.request(DownloadRequest(url: "http://d.test/s", sha256: Self.digest, headers: secret))
        #expect(same.reused && same.snapshot.id == privateOne.snapshot.id)
        _ = driver
        await engine.shutdown()
    }

    @Test func ignoredQueryParametersCoalesceAndAreRedacted() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.coalesceIgnoreQuery = ["X-Amz-Signature", "Expires"] }
        let a = try engine.request(DownloadRequest(url: "http://o.test/obj?v=1&X-Amz-Signature=aaa&Expires=1"))
        let b = try engine.request(DownloadRequest(url: "http://o.test/obj?X-Amz-Signature=bbb&v=1&Expires=2"))
        let c = try engine.request(DownloadRequest(url: "http://o.test/obj?v=2&X-Amz-Signature=aaa"))
        // Names are exact: another case is another parameter.
        let d = try engine.request(DownloadRequest(url: "http://o.test/obj?v=1&x-amz-signature=aaa&Expires=1"))
        #expect(a.snapshot.id == b.snapshot.id && b.coalesced)
        #expect(Set([a.snapshot.id, c.snapshot.id, d.snapshot.id]).count == 3)
        #expect(a.snapshot.url == "http://o.test/obj?v=1&X-Amz-Signature=REDACTED&Expires=REDACTED")
        #expect(d.snapshot.url == "http://o.test/obj?v=1&x-amz-signature=aaa&Expires=REDACTED")
        try await withTimeout(20) { await driver.waitForStarts(3) }
        // The first caller's URL is fetched, signature and all.
        #expect((0..<3).map { driver.transfer($0).request.url }.contains("http://o.test/obj?v=1&X-Amz-Signature=aaa&Expires=1"))
        await engine.shutdown()
    }

    @Test func aResumeUsesTheURLOfTheCallerThatResumedIt() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.coalesceIgnoreQuery = ["Signature"] }
        let first = try engine.request(DownloadRequest(url: "http://o.test/f?Signature=old"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let t = driver.transfer(0)
        #expect(t.respond(200, ["Content-Length": "3000", "ETag": "\"v\""]))
        try t.send(Array(Self.body[0..<1000]))
        _ = try await EngineFixture.cancelAndSettle(engine, token: first.token, id: first.snapshot.id)
        let again = try engine.request(DownloadRequest(url: "http://o.test/f?Signature=new"))
        #expect(again.snapshot.id == first.snapshot.id)
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(driver.transfer(1).request.url == "http://o.test/f?Signature=new")
        #expect(driver.transfer(1).header("Range") == "bytes=1000-")
        await engine.shutdown()
    }

    @Test(arguments: [
        ("http://h/p", ["s"], "http://h/p"),
        ("http://h/p?s=1", ["s"], "http://h/p"),
        ("http://h/p?a=1&s=2&b", ["s"], "http://h/p?a=1&b"),
        ("http://h/p?s&a=%20", ["s"], "http://h/p?a=%20"),
        ("http://h/p?S=1", ["s"], "http://h/p?S=1"),
        ("http://h/p?a=1", [], "http://h/p?a=1"),
    ])
    func keyURLs(url: String, names: [String], key: String) {
        #expect(CoalescingKey(url: url, ignoring: Set(names), credential: nil).url == key)
    }

    @Test(arguments: [
        ("http://h/p?s=1&a=2", ["s"], "http://h/p?s=REDACTED&a=2"),
        ("http://h/p?s&a=2", ["s"], "http://h/p?s&a=2"),
        ("http://h/p?a=2", ["s"], "http://h/p?a=2"),
        ("http://h/p?s=1", [], "http://h/p?s=1"),
    ])
    func redactedURLs(url: String, names: [String], shown: String) {
        #expect(QueryParameters.redacting(url, names: Set(names)) == shown)
    }
}
