import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct EnginePurgeTests {
    @Test func cacheLimitPurgesPausedPartialsFirstThenLeastRecentlyUsedCacheFiles() async throws {
        let body = EngineFixture.body(10_000)
        let driver = FakeTransferDriver { request, _ in
            request.url.hasSuffix("/c") ? nil : .init(status: 200, headers: ["Content-Length": "10000", "ETag": "\"e\""], body: body)
        }
        let root = EngineFixture.root()
        let engine = try EngineFixture.engine(root, driver: driver) { $0.cacheMaxBytes = 25_000 }
        func fetch(_ name: String, storage: StorageClass = .cache) async throws -> String {
            let (r, s) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/\(name)", storage: storage),
                                                                until: [.completed, .failed])
            #expect(s.state == .completed)
            return r.snapshot.id
        }
        let a = try await fetch("a")
        let p = try await fetch("p", storage: .persistent)  // never purged, not counted
        let b = try await fetch("b")
        // c: paused with 8000 kept bytes.
        let c = try await EngineFixture.partial(engine, driver: driver, url: "http://o.test/c", attempt: 3,
                                                headers: ["Content-Length": "10000", "ETag": "\"c\""], sending: Array(body[0..<8000]))
        #expect(engine.snapshot(id: c.snapshot.id)?.bytesWritten == 8000)
        // b used more recently than a.
        _ = engine.completedFile(id: b)
        let d = try await fetch("d")
        // 10k a + 10k b + 10k d + 8k partial = 38k > 25k: the partial goes, then a (least recently used).
        #expect(engine.snapshot(id: c.snapshot.id)?.bytesWritten == 0)
        let partialOfC = root.appendingPathComponent("state/partials/\(c.snapshot.id).part").path
        #expect(await eventually(within: 5) { FileStore.fileSize(partialOfC) == nil })  // deleted on the work queue
        #expect(engine.snapshot(id: a) == nil)
        #expect(engine.completedFile(id: b) != nil)
        #expect(engine.completedFile(id: d) != nil)
        #expect(engine.completedFile(id: p) != nil)
        // A purged completed download can be fetched again.
        let again = try engine.request(DownloadRequest(url: "http://o.test/a"))
        #expect(!again.coalesced)
    }

    @Test func lowDiskPurgesPausedPartialsBeforeTheNextAttempt() async throws {
        let driver = FakeTransferDriver()
        let root = EngineFixture.root()
        var c = EngineFixture.configuration(root)
        c.maxConcurrentTransfers = 4
        // Every file system counts as "low" with this threshold.
        let engine = try DownloadEngine(configuration: c, driver: driver, scheduler: EagerScheduler(),
                                        diskPressure: DiskPressure(minFreeBytes: Int64.max, minFreeFraction: 0))
        let x = try await EngineFixture.partial(engine, driver: driver, url: "http://o.test/x",
                                                headers: ["Content-Length": "10000", "ETag": "\"x\""],
                                                sending: [UInt8](repeating: 1, count: 5000))
        #expect(engine.snapshot(id: x.snapshot.id)?.bytesWritten == 5000)
        _ = try engine.request(DownloadRequest(url: "http://o.test/y"))
        try await withTimeout(20) { await driver.waitForStarts(2) }
        #expect(engine.snapshot(id: x.snapshot.id)?.bytesWritten == 0)
        let partialOfX = root.appendingPathComponent("state/partials/\(x.snapshot.id).part").path
        #expect(await eventually(within: 5) { FileStore.fileSize(partialOfX) == nil })  // deleted on the work queue
    }
}
