import Foundation
import Testing
@testable import DownloaderEngine

/// A consumer runs well after it was woken (10 000 streams on two cores): what it gets is decided
/// when it runs. The consumer's task runs on a `ManualTaskExecutor`, so "later" is exact.
@Suite struct LateConsumerTests {
    private static let date = Date(timeIntervalSince1970: 1_800_000_000)

    private static func progress(_ bytes: Int64) -> DownloadEvent {
        var s = DownloadSnapshot(id: "d", url: "u", state: .downloading, storage: .cache, createdAt: date, updatedAt: date)
        s.bytesWritten = bytes
        return .progress(s)
    }

    private static let paused = DownloadEvent.paused(
        DownloadSnapshot(id: "d", url: "u", state: .paused, storage: .cache, createdAt: date, updatedAt: date))

    private static func unpaced() -> SubscriberRegistry {
        SubscriberRegistry(scheduler: ManualScheduler(), pacing: ProgressPacing(deliveriesPerSecond: 0))
    }

    /// Starts a consumer's `next()` on `executor` and runs it until it waits.
    private static func waitingConsumer(_ queue: SubscriberQueue, on executor: ManualTaskExecutor) -> Task<DownloadEvent?, Never> {
        let task = Task(executorPreference: executor) { await queue.next() }
        executor.runAll()
        #expect(queue.isConsumerWaiting)
        return task
    }

    @Test func aLateConsumerGetsTheNewestProgress() async throws {
        let executor = ManualTaskExecutor()
        let registry = Self.unpaced()
        let queue = registry.makeQueue(for: "d")
        registry.publish(Self.progress(1), to: "d")
        #expect(await queue.next() == Self.progress(1))
        let consumer = Self.waitingConsumer(queue, on: executor)
        registry.publish(Self.progress(2), to: "d")  // wakes the consumer with 2...
        #expect(executor.queuedCount == 1)
        registry.publish(Self.progress(3), to: "d")  // ...which has not run yet
        #expect(queue.pendingCount == 0)  // only recorded: the consumer reads it when it runs
        #expect(registry.awakeCount(of: "d") == 0)
        executor.runAll()
        #expect(try await withTimeout(10) { await consumer.value } == Self.progress(3))
        #expect(queue.pendingCount == 0)
    }

    @Test func aLifecycleEventSupersedesTheProgressInHand() async throws {
        let executor = ManualTaskExecutor()
        let registry = Self.unpaced()
        let queue = registry.makeQueue(for: "d")
        registry.publish(Self.progress(1), to: "d")
        _ = await queue.next()
        let consumer = Self.waitingConsumer(queue, on: executor)
        registry.publish(Self.progress(2), to: "d")
        registry.publish(Self.paused, to: "d")
        executor.runAll()
        #expect(try await withTimeout(10) { await consumer.value } == Self.paused)
        #expect(queue.pendingCount == 0)
        // After the lifecycle event nothing is "newest" until the next progress.
        registry.publish(Self.progress(4), to: "d")
        #expect(await queue.next() == Self.progress(4))
    }

    /// The subscription's first event (the current snapshot) is handed out even when a lifecycle
    /// event follows at once, whether it was pending or in the consumer's hand.
    @Test func theFirstEventIsNeverSuperseded() async throws {
        let pending = Self.unpaced().makeQueue(for: "d")
        pending.push(Self.progress(1))
        pending.push(Self.paused)
        #expect(await pending.next() == Self.progress(1))
        #expect(await pending.next() == Self.paused)

        let executor = ManualTaskExecutor()
        let inHand = Self.unpaced().makeQueue(for: "d")
        let consumer = Self.waitingConsumer(inHand, on: executor)
        inHand.push(Self.progress(1))
        inHand.push(Self.paused)
        executor.runAll()
        #expect(try await withTimeout(10) { await consumer.value } == Self.progress(1))
        #expect(await inHand.next() == Self.paused)
    }
}
