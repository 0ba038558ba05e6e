import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A caller who joins while the last attempt settles (its body whole, being hashed, synced and
/// published), after every earlier caller left: the expectations it brings bind the file that
/// attempt publishes, exactly as if it had joined during the transfer.
@Suite(.timeLimit(.minutes(1)))
struct EngineSettlingJoinTests {
    static let url = "http://o.test/settling.bin"
    let body = EngineFixture.body(1000)
    let other = String(repeating: "0", count: 64)

    /// A download of `body` by a first caller, who leaves while its attempt settles, held in
    /// `hold` (`partialWrite`: the body, smaller than a buffer, is written when the settle hashes
    /// it; `beforePublishRename`: once its file is verified and about to be published).
    func settling(_ engine: DownloadEngine, _ driver: FakeTransferDriver, held: OneShot<Void>) async throws -> String {
        let first = try engine.request(DownloadRequest(url: Self.url))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["ETag": "\"v1\"", "Content-Length": "\(body.count)"]))
        try driver.transfer(0).send(body)
        driver.transfer(0).finish()
        try await withTimeout(20) { try await held.value() }
        _ = engine.cancel(token: first.token)
        return first.snapshot.id
    }

    /// Joined before the file was verified: the new sha256 is checked against it (before, the
    /// settle checked only the expectations known when the transfer ended: `completed` with
    /// another file than the one asked for).
    @Test func aSha256BroughtBeforeTheFileIsVerifiedIsCheckedAgainstIt() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let held = OneShot<Void>()
        let release = DispatchSemaphore(value: 0)
        engine.core.locked {
            engine.core.hooks.partialWrite = { fd, base, count, at in
                held.set(())
                release.wait()
                return Glibc.pwrite(fd, base, count, at)
            }
        }
        let id = try await settling(engine, driver, held: held)
        let joined = try engine.request(DownloadRequest(url: Self.url, sha256: other))
        #expect(joined.snapshot.id == id)
        release.signal()
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .failed && done.error?.code == .checksumMismatch, "\(done.state) \(String(describing: done.error))")
        await engine.shutdown()
    }

    /// Joined while the verified file is being published: its digest is known, so another sha256
    /// is refused as for a completed download (before, it was taken as the download's expectation
    /// and the download completed with another digest than the one it then expected).
    @Test func aSha256OtherThanThePublishedFilesIsRefusedWhilePublishing() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let held = OneShot<Void>()
        let release = DispatchSemaphore(value: 0)
        engine.core.locked {
            engine.core.hooks.beforePublishRename = {
                held.set(())
                release.wait()
            }
        }
        let id = try await settling(engine, driver, held: held)
        #expect(throws: EngineError.self) { try engine.request(DownloadRequest(url: Self.url, sha256: other)) }
        let same = try engine.request(DownloadRequest(url: Self.url, sha256: SHA256Hasher.hex(body), size: Int64(body.count)))
        #expect(same.snapshot.id == id)
        release.signal()
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed && done.sha256 == SHA256Hasher.hex(body))
        await engine.shutdown()
    }
}
