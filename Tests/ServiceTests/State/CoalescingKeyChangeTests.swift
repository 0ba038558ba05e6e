import Foundation
import Testing
@testable import DownloaderEngine

/// Turning `--coalesce-ignore-query` on over stored downloads makes several of them share one
/// coalescing key. None of them is lost: each keeps its id, its callers' tokens and its files;
/// new callers join the best of them (a completed one, else the one with the most bytes).
@Suite struct CoalescingKeyChangeTests {
    static let body = EngineFixture.body(3000)

    @Test func downloadsThatComeToShareAKeyAllStay() async throws {
        let root = EngineFixture.root()
        // Sig=p stays pending for the test to drive; the others complete at once.
        let driver = FakeTransferDriver { request, _ in
            request.url.hasSuffix("Sig=p") ? nil : .init(status: 200, headers: ["ETag": "\"v\""], body: Self.body)
        }
        let engine = try EngineFixture.engine(root, driver: driver)
        let paused = try await EngineFixture.partial(engine, driver: driver, url: "http://o.test/f?Sig=p",
                                                     headers: ["ETag": "\"v\"", "Content-Length": "3000"], sending: Array(Self.body[0..<1000]))
        let (kept, keptDone) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f?Sig=a", storage: .persistent),
                                                                      until: [.completed])
        let (other, otherDone) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f?Sig=b", storage: .persistent),
                                                                        until: [.completed])
        let files = try [keptDone, otherDone].map { try #require($0.path) }
        await engine.shutdown()

        let next = try EngineFixture.engine(root, driver: FakeTransferDriver()) { $0.coalesceIgnoreQuery = ["Sig"] }
        for (id, state) in [(paused.snapshot.id, DownloadState.paused), (kept.snapshot.id, .completed), (other.snapshot.id, .completed)] {
            #expect(next.snapshot(id: id)?.state == state, "download \(id) survives the new key")
        }
        #expect(next.snapshot(id: paused.snapshot.id)?.bytesWritten == 1000)
        #expect(next.liveTokens(among: [kept.token, other.token]) == [kept.token, other.token])
        for path in files { #expect(FileManager.default.fileExists(atPath: path), "\(path) is kept") }
        // A new caller joins a completed one: nothing is fetched.
        let joined = try next.request(DownloadRequest(url: "http://o.test/f?Sig=c"))
        #expect([kept.snapshot.id, other.snapshot.id].contains(joined.snapshot.id) && joined.snapshot.state == .completed)
        // Each one goes its own way: removing the one new callers join leaves the others.
        #expect(next.remove(id: joined.snapshot.id) != nil)
        let survivor = joined.snapshot.id == kept.snapshot.id ? other : kept
        #expect(next.snapshot(id: survivor.snapshot.id)?.state == .completed)
        #expect(next.snapshot(id: paused.snapshot.id)?.state == .paused)
        // The next caller joins the other completed one (it took the removed one's place).
        #expect(try next.request(DownloadRequest(url: "http://o.test/f?Sig=d")).snapshot.id == survivor.snapshot.id)
        await next.shutdown()

        // And they all stay across one more restart.
        let last = try EngineFixture.engine(root, driver: FakeTransferDriver()) { $0.coalesceIgnoreQuery = ["Sig"] }
        #expect(last.snapshot(id: survivor.snapshot.id)?.state == .completed)
        #expect(last.snapshot(id: paused.snapshot.id)?.bytesWritten == 1000)
        #expect(last.snapshot(id: joined.snapshot.id) == nil)
        await last.shutdown()
    }
}

extension CoalescingKeyChangeTests {
    @Test(arguments: [
        (DownloadState.completed, Int64(0), DownloadState.paused, Int64(900), true),
        (.paused, 900, .completed, 0, false),
        (.paused, 900, .paused, 100, true),
        (.paused, 100, .paused, 100, false),  // a tie keeps the first
        (.queued, 0, .failed, 900, true),
        (.failed, 900, .downloading, 0, false),
        (.completed, 10, .completed, 20, false),
    ])
    func whichOneNewCallersJoin(state: DownloadState, bytes: Int64, other: DownloadState, otherBytes: Int64, joinable: Bool) {
        #expect(EngineCore.joinable(state, bytes, before: other, otherBytes) == joinable)
    }
}
