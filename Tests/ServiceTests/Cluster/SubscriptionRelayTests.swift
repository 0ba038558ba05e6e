import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// The relay on a manual clock, with rows from a stand-in for the database: one query per poll for
/// every followed download, polls only while someone follows, and downloads nobody follows any
/// more forgotten.
@Suite(.timeLimit(.minutes(1))) struct SubscriptionRelayTests {
    final class Rows: RelaySource, @unchecked Sendable {
        let state = Mutex<(rows: [String: ClusterRow], queries: [[String]])>(([:], []))

        func rows(ids: [String]) throws(StateStoreError) -> [String: ClusterRow] {
            state.withLock { s in
                s.queries.append(ids.sorted())
                return s.rows.filter { ids.contains($0.key) }
            }
        }

        func removers(of ids: [String]) throws(StateStoreError) -> [String: RemovalCause] { [:] }

        var queries: [[String]] { state.withLock { $0.queries } }

        func set(_ id: String, bytes: Int64) {
            state.withLock { $0.rows[id] = ClusterRow(stored: ClusterReadsTests.row(id, .downloading, created: 1, offset: bytes)) }
        }
    }

    /// Waits (bounded) until `rows` had `count` queries: the poll runs on the relay's own queue.
    static func waitForQueries(_ rows: Rows, _ count: Int) async throws {
        try await withTimeout(20) {  // A bound on a hang, not a speed: a loaded CI starves the test's tasks for seconds.
            while rows.queries.count < count { try await Task.sleep(nanoseconds: 5_000_000) }
        }
    }

    /// Waits (bounded) until the poll that just queried has scheduled the next one: it does so after
    /// its query, on the relay's queue, so moving the clock before that would leave the next poll
    /// an interval beyond the time the test moves to (a run under load timed out so).
    static func waitForNextPoll(_ clock: ManualScheduler) async throws {
        try await withTimeout(5) { await clock.waitForTimer(dueIn: SubscriptionRelay.interval) }
    }

    @Test func onePollQueriesEveryFollowedDownloadAtOnceAndOnlyWhileFollowed() async throws {
        let clock = ManualScheduler()
        let rows = Rows()
        rows.set("a", bytes: 10)
        rows.set("b", bytes: 20)
        let registry = SubscriberRegistry(scheduler: clock)
        let relay = SubscriptionRelay(source: rows, registry: registry, scheduler: clock, ignoring: [])
        let a1 = DownloadSubscription(queue: relay.subscribe(rows.state.withLock { $0.rows["a"]! }))
        let a2 = DownloadSubscription(queue: relay.subscribe(rows.state.withLock { $0.rows["a"]! }))
        let b = DownloadSubscription(queue: relay.subscribe(rows.state.withLock { $0.rows["b"]! }))
        #expect(relay.count == 2 && registry.count == 3)
        for s in [a1, a2, b] { #expect(try await ClusterReadsTests.next(s, within: 20) { _ in true }?.snapshot.state == .downloading) }

        clock.advance(0.2)
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(rows.queries.isEmpty, "not due yet")
        rows.set("a", bytes: 15)
        clock.advance(0.05)
        try await Self.waitForQueries(rows, 1)
        #expect(rows.queries == [["a", "b"]], "one query for both")
        for s in [a1, a2] { #expect(try await ClusterReadsTests.next(s, within: 20) { _ in true }?.snapshot.bytesWritten == 15) }

        b.cancel()
        try await Self.waitForNextPoll(clock)
        clock.advance(SubscriptionRelay.interval)
        try await Self.waitForQueries(rows, 2)
        try await Self.waitForNextPoll(clock)
        clock.advance(SubscriptionRelay.interval)
        try await Self.waitForQueries(rows, 3)
        #expect(rows.queries.last == ["a"] && relay.count == 1, "b is followed no more")
        a1.cancel()
        a2.cancel()
        try await Self.waitForNextPoll(clock)
        clock.advance(SubscriptionRelay.interval)
        try await Self.waitForQueries(rows, 4)
        try await withTimeout(5) { while relay.count != 0 { try await Task.sleep(nanoseconds: 5_000_000) } }
        clock.advance(10)
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(rows.queries.count == 4, "no polling once nobody follows")
    }

    /// A relayed progress is recorded as the download's newest only while the download has
    /// queues: one delivered after its last queue went (a poll or a hand-over's catch-up racing the
    /// last client's leaving) used to stay recorded for good.
    @Test func aRelayedProgressIsRecordedOnlyWhileTheDownloadHasQueues() {
        let registry = SubscriberRegistry(scheduler: ManualScheduler())
        let snapshot = DownloadSnapshot(id: "a", url: "http://o.test/a", state: .downloading, storage: .cache, bytesWritten: 5,
                                        createdAt: Date(), updatedAt: Date())
        registry.recordRelayed(.progress(snapshot), of: "a")
        #expect(registry.pacer.latestRecord(of: "a") == nil, "nobody follows it")
        let queue = registry.makeQueue(for: "a")
        registry.recordRelayed(.progress(snapshot), of: "a")
        #expect(registry.pacer.latestRecord(of: "a") != nil)
        queue.cancel()
        #expect(registry.pacer.latestRecord(of: "a") == nil, "cleared with the last queue")
        registry.recordRelayed(.progress(snapshot), of: "a")  // the late delivery
        #expect(registry.pacer.latestRecord(of: "a") == nil)
    }

    @Test func beyondItsBoundASubscriptionEndsAtOnce() async throws {
        let clock = ManualScheduler()
        let rows = Rows()
        rows.set("a", bytes: 1)
        rows.set("b", bytes: 2)
        let relay = SubscriptionRelay(source: rows, registry: SubscriberRegistry(scheduler: clock), scheduler: clock, ignoring: [],
                                      maxDownloads: 1)
        let a = DownloadSubscription(queue: relay.subscribe(rows.state.withLock { $0.rows["a"]! }))
        let a2 = DownloadSubscription(queue: relay.subscribe(rows.state.withLock { $0.rows["a"]! }))
        let b = DownloadSubscription(queue: relay.subscribe(rows.state.withLock { $0.rows["b"]! }))
        #expect(relay.count == 1)
        #expect(try await ClusterReadsTests.next(b, within: 20) { _ in true } == nil, "b was refused: its stream ended")
        for s in [a, a2] { #expect(try await ClusterReadsTests.next(s, within: 20) { _ in true }?.snapshot.bytesWritten == 1) }
        rows.set("a", bytes: 3)
        clock.advance(SubscriptionRelay.interval)
        for s in [a, a2] { #expect(try await ClusterReadsTests.next(s, within: 20) { _ in true }?.snapshot.bytesWritten == 3) }
    }
}
