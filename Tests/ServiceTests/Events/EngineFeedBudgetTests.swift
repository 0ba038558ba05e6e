import Foundation
import Testing
@testable import DownloaderEngine

/// `watchAll` through the engine: a fresh watcher is refused while the snapshots earlier ones hold,
/// not yet read, leave no room for one of every download (`eventSnapshotBudget`); the operator's is
/// not; reading makes room; a replay (no snapshot) is never refused.
@Suite struct EngineFeedBudgetTests {
    @Test func freshWatchersAreRefusedWhileUnreadSnapshotsFillTheBudget() async throws {
        let body = EngineFixture.body(1_000)
        let driver = FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": "\(body.count)"], body: body) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.eventSnapshotBudget = 4 }
        for name in ["a", "b", "c"] {
            _ = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/\(name)"), until: [.completed])
        }
        let idle = try #require(engine.watchAll())  // none held: in, and it holds 3 it does not read
        #expect(try await Self.items(idle, 1).count == 1)
        #expect(engine.watchAll() == nil)  // 2 held + 3 > 4
        let operatorWatcher = try #require(engine.watchAll(exempt: true))
        let snapshot = try await Self.items(operatorWatcher, 3)
        #expect(snapshot.count == 3 && snapshot.allSatisfy { if case .snapshot = $0.kind { true } else { false } })
        #expect(snapshot.map(\.kind.snapshot.url) == ["a", "b", "c"].map { "http://o.test/\($0)" }, "oldest first")
        #expect(engine.watchAll(after: try #require(snapshot.last).id) != nil)  // a replay holds no snapshot
        _ = try await Self.items(idle, 2)  // read: nothing held
        let next = try #require(engine.watchAll())
        #expect(try await Self.items(next, 3).count == 3)
        idle.cancel()
        operatorWatcher.cancel()
        next.cancel()
    }

    /// The next `count` items (the snapshot is handed over by an effect: polled until it is there).
    static func items(_ watcher: FeedSubscription, _ count: Int) async throws -> [FeedItem] {
        var out: [FeedItem] = []
        let deadline = Date().addingTimeInterval(10)
        while out.count < count && Date() < deadline {
            if case .item(let item) = watcher.poll(waker: {}) { out.append(item) } else { try await Task.sleep(for: .milliseconds(10)) }
        }
        return out
    }
}
