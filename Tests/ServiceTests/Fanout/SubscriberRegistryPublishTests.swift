import Foundation
import Testing
@testable import DownloaderEngine

/// `SubscriberRegistry.publish` visits the queues a progress may change, not every subscriber:
/// those waiting for the pacer's tick are left to it until the tick or a lifecycle event.
@Suite struct SubscriberRegistryPublishTests {
    private static func progress(_ bytes: Int64) -> DownloadEvent { ProgressPacingTests.progress(bytes) }
    private static func bytes(_ event: DownloadEvent?) -> Int64? { ProgressPacingTests.bytes(event) }

    private static func waitUntilWaiting(_ queues: [SubscriberQueue]) async throws {
        try await withTimeout(10) {
            while !queues.allSatisfy(\.isConsumerWaiting) && !Task.isCancelled { await Task.yield() }
        }
    }

    /// Every consumer asks for its next event; returns what each gets.
    private static func nextOfAll(_ queues: [SubscriberQueue]) -> Task<[DownloadEvent?], Never> {
        Task {
            await withTaskGroup(of: (Int, DownloadEvent?).self) { group in
                for (index, queue) in queues.enumerated() { group.addTask { (index, await queue.next()) } }
                var got = [DownloadEvent?](repeating: nil, count: queues.count)
                for await (index, event) in group { got[index] = event }
                return got
            }
        }
    }

    @Test func queuesAwaitingTheTickAreSkippedUntilTheTickOrALifecycleEvent() async throws {
        let scheduler = ManualScheduler()
        // Four subscribers at one delivery a second: a spacing of 2-6 s each.
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), tick: 0.01, scheduler: scheduler)
        let registry = SubscriberRegistry(pacer: pacer)
        let waiting = (0..<3).map { _ in registry.makeQueue(for: "x") }
        let busy = registry.makeQueue(for: "x")  // its consumer never asks

        // The first progress is due for all: handed at once; everyone stays awake.
        let first = Self.nextOfAll(waiting)
        try await Self.waitUntilWaiting(waiting)
        registry.publish(Self.progress(1), to: "x")
        let got1 = try await withTimeout(10) { await first.value }
        #expect(got1.map(Self.bytes) == [1, 1, 1])
        #expect(registry.awakeCount(of: "x") == 4)

        // Not due: the waiting consumers defer and drop out; the busy queue conflates and stays.
        let second = Self.nextOfAll(waiting)
        try await Self.waitUntilWaiting(waiting)
        registry.publish(Self.progress(2), to: "x")
        #expect(registry.awakeCount(of: "x") == 1)
        #expect(pacer.watchedCount == 3)
        registry.publish(Self.progress(3), to: "x")
        #expect(registry.awakeCount(of: "x") == 1)
        #expect(pacer.watchedCount == 3)  // not watched again
        #expect(busy.pendingCount == 1)
        let allWaiting = waiting.allSatisfy { $0.isConsumerWaiting }
        #expect(allWaiting)

        // Their ticks hand the newest progress and take them back in.
        scheduler.advance(7)
        let got2 = try await withTimeout(10) { await second.value }
        #expect(got2.map(Self.bytes) == [3, 3, 3])
        #expect(registry.awakeCount(of: "x") == 4)
        #expect(pacer.watchedCount == 0)

        // Deferred again, then a lifecycle event: handed to all at once, all awake again.
        let third = Self.nextOfAll(waiting)
        try await Self.waitUntilWaiting(waiting)
        registry.publish(Self.progress(4), to: "x")
        #expect(registry.awakeCount(of: "x") == 1)
        let s = DownloadSnapshot(id: "x", url: "u", state: .paused, storage: .cache, createdAt: Date(), updatedAt: Date())
        registry.publish(.paused(s), to: "x")
        let got3 = try await withTimeout(10) { await third.value }
        for event in got3 {
            if case .paused? = event {} else { Issue.record("expected paused, got \(String(describing: event))") }
        }
        #expect(registry.awakeCount(of: "x") == 4)
        // The busy consumer, asking at last, gets the newest progress (conflated) and the lifecycle event.
        #expect(Self.bytes(await busy.next()) == 4)
        if case .paused? = await busy.next() {} else { Issue.record("the busy consumer missed paused") }
    }
}
