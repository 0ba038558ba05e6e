import Foundation
import Testing
@testable import DownloaderEngine

/// A download the engine evicts hands its own subscribers over to the relay: they get no more of
/// the engine's events, the relay feeds them from the row the engine wrote last (nothing told
/// twice), and the relay's earlier subscribers are told first what changed since their last poll.
@Suite(.timeLimit(.minutes(1))) struct SubscriptionHandOverTests {
    typealias Rows = SubscriptionRelayTests.Rows

    static func row(_ id: String, _ state: DownloadState, bytes: Int64) -> ClusterRow {
        ClusterRow(stored: ClusterReadsTests.row(id, state, created: 1, offset: bytes))
    }

    @Test func anEvictedDownloadsOwnSubscribersFollowItsRowFromWhereTheEngineLeftThem() async throws {
        let clock = ManualScheduler()
        let rows = Rows()
        let registry = SubscriberRegistry(scheduler: clock)
        let relay = SubscriptionRelay(source: rows, registry: registry, scheduler: clock, ignoring: [])
        // The engine's own subscriber: it saw the download paused at 40 bytes.
        let own = DownloadSubscription(queue: registry.makeQueue(for: "a", after: 3))
        let paused = Self.row("a", .paused, bytes: 40)
        registry.publish(.paused(paused.snapshot(ignoring: [])), to: "a", sequence: 4)
        #expect(try await ClusterReadsTests.next(own, within: 20) { _ in true }?.snapshot.state == .paused)

        relay.handOver(id: "a", view: RelayDiff.View(paused, ignoring: []))
        #expect(relay.count == 1, "followed from now on")
        registry.publish(.progress(Self.row("a", .downloading, bytes: 99).snapshot(ignoring: [])), to: "a", sequence: 5)
        rows.state.withLock { $0.rows["a"] = paused }
        clock.advance(SubscriptionRelay.interval)
        try await SubscriptionRelayTests.waitForQueries(rows, 1)
        // Resumed elsewhere: the relay tells it.
        rows.state.withLock { $0.rows["a"] = Self.row("a", .downloading, bytes: 40) }
        clock.advance(SubscriptionRelay.interval)
        try await SubscriptionRelayTests.waitForQueries(rows, 2)
        let resumed = try await ClusterReadsTests.next(own, within: 20) { _ in true }
        guard case .resumed(let offset, let restarted, let snapshot)? = resumed else {
            Issue.record("the engine's later event never reached it, the unchanged row told nothing: \(String(describing: resumed))")
            return
        }
        #expect(offset == 40 && !restarted && snapshot.state == .downloading)

        var done = ClusterReadsTests.row("a", .completed, created: 1)
        (done.finalPath, done.size, done.sha256) = ("/x/a.bin", 5, String(repeating: "0", count: 64))
        rows.state.withLock { $0.rows["a"] = ClusterRow(stored: done) }
        clock.advance(SubscriptionRelay.interval)
        let last = try await ClusterReadsTests.next(own, within: 20) { $0.isTerminal }
        #expect(last?.snapshot.state == .completed)
        #expect(try await ClusterReadsTests.next(own, within: 20) { _ in true } == nil, "the stream ended")
        #expect(registry.count == 0)
    }

    @Test func theRelaysEarlierSubscribersCatchUpOnceAndEndedOrUnfollowedDownloadsAreNotFollowed() async throws {
        let clock = ManualScheduler()
        let rows = Rows()
        let registry = SubscriberRegistry(scheduler: clock)
        let relay = SubscriptionRelay(source: rows, registry: registry, scheduler: clock, ignoring: [])
        let running = Self.row("b", .downloading, bytes: 10)
        rows.state.withLock { $0.rows["b"] = running }
        let relayed = DownloadSubscription(queue: relay.subscribe(running))
        #expect(try await ClusterReadsTests.next(relayed, within: 20) { _ in true }?.snapshot.bytesWritten == 10)
        let own = DownloadSubscription(queue: registry.makeQueue(for: "b", after: 0))

        let paused = Self.row("b", .paused, bytes: 30)
        rows.state.withLock { $0.rows["b"] = paused }
        relay.handOver(id: "b", view: RelayDiff.View(paused, ignoring: []))
        let caught = try await ClusterReadsTests.next(relayed, within: 20) { _ in true }
        #expect(caught?.snapshot.state == .paused && caught?.snapshot.bytesWritten == 30, "\(String(describing: caught))")
        clock.advance(SubscriptionRelay.interval)
        try await SubscriptionRelayTests.waitForQueries(rows, 1)
        #expect(own.queue.pendingCount == 0 && relayed.queue.pendingCount == 0, "the unchanged row is not told again")

        relay.handOver(id: "nobody", view: RelayDiff.View(Self.row("nobody", .paused, bytes: 1), ignoring: []))
        #expect(relay.count == 1, "a download without subscribers is not followed")
        relayed.cancel()
        own.cancel()
    }
}
