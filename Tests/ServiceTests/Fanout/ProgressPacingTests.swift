import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// Progress pacing with many subscribers: the spacing table, and a queue under a manual clock.
@Suite struct ProgressPacingTests {
    @Test(arguments: [
        // (subscribers, deliveries per second, mean spacing in ms; 0 = unpaced)
        (1, 10_000.0, 0),
        (999, 10_000.0, 0),
        (1_000, 10_000.0, 100),
        (10_000, 10_000.0, 1_000),
        (20_000, 10_000.0, 2_000),
        (10_000, 0.0, 0),  // no budget: unpaced
    ])
    func meanSpacing(subscribers: Int, budget: Double, milliseconds: UInt64) {
        let pacing = ProgressPacing(deliveriesPerSecond: budget, minimumSpacing: 0.1)
        #expect(pacing.meanSpacing(subscribers: subscribers) == milliseconds * 1_000_000)
    }

    @Test func spacingVariesAroundTheMean() {
        let pacing = ProgressPacing(deliveriesPerSecond: 10_000, minimumSpacing: 0.1)
        let mean = pacing.meanSpacing(subscribers: 10_000)
        var spacings: [UInt64] = []
        for queue in UInt64(1)...200 {
            for delivery in UInt64(1)...5 {
                spacings.append(pacing.spacing(subscribers: 10_000, queue: queue, delivery: delivery))
            }
        }
        #expect(spacings.allSatisfy { $0 >= mean / 2 && $0 < mean + mean / 2 })
        let average = Double(spacings.reduce(0, +)) / Double(spacings.count)
        #expect(abs(average - Double(mean)) < Double(mean) * 0.1)
        #expect(Set(spacings).count > 900)  // spread, not a handful of values
        #expect(pacing.spacing(subscribers: 10, queue: 1, delivery: 1) == 0)
    }

    static func progress(_ bytes: Int64) -> DownloadEvent {
        var s = DownloadSnapshot(id: "x", url: "u", state: .downloading, storage: .cache, createdAt: Date(), updatedAt: Date())
        s.bytesWritten = bytes
        return .progress(s)
    }

    static func bytes(_ event: DownloadEvent?) -> Int64? {
        if case .progress(let s)? = event { return s.bytesWritten }
        return nil
    }

    /// A waiting consumer gets the first progress at once, then no progress before it is due (the
    /// latest one when it is), and lifecycle events at once. Time moves only with the scheduler.
    @Test func queueDeliversPacedProgressAndImmediateLifecycle() async throws {
        let scheduler = ManualScheduler()
        // One subscriber at 1 delivery per second: a mean spacing of 1 s (0.5-1.5 s).
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), tick: 0.005,
                                  scheduler: scheduler)
        let registry = SubscriberRegistry(pacer: pacer)
        let queue = registry.makeQueue(for: "x")  // one subscriber
        registry.publish(Self.progress(1), to: "x")
        #expect(Self.bytes(await queue.next()) == 1)  // the first is due at once

        // Not due: the consumer keeps waiting while progress conflates.
        let second = Task { await queue.next() }
        try await Self.waitUntilWaiting(queue)
        registry.publish(Self.progress(2), to: "x")
        registry.publish(Self.progress(3), to: "x")
        #expect(pacer.watchedCount == 1)
        #expect(scheduler.pendingCount == 1)  // the pacer's tick
        scheduler.advance(0.4)  // ticks, none due yet (the spacing is at least 0.5 s)
        #expect(queue.isConsumerWaiting)
        // A lifecycle event wakes it at once and replaces the older pending progress.
        let s = DownloadSnapshot(id: "x", url: "u", state: .paused, storage: .cache, createdAt: Date(), updatedAt: Date())
        registry.publish(.paused(s), to: "x")
        let woken = try await withTimeout(10) { await second.value }
        if case .paused? = woken {} else { Issue.record("expected paused, got \(String(describing: woken))") }
        #expect(queue.pendingCount == 0)

        // Progress again: pending until the clock passes the due time, then the latest is delivered.
        let third = Task { await queue.next() }
        try await Self.waitUntilWaiting(queue)
        registry.publish(Self.progress(4), to: "x")
        registry.publish(Self.progress(5), to: "x")
        #expect(queue.isConsumerWaiting)
        scheduler.advance(2)
        let delivered = try await withTimeout(10) { await third.value }
        #expect(Self.bytes(delivered) == 5)
        #expect(pacer.watchedCount == 0)
        #expect(scheduler.pendingCount == 0)  // no ticks once nothing is watched
    }

    /// The deferred progress goes out on the first tick at or after its due time, not before.
    @Test func deferredProgressGoesOutWhenDue() async throws {
        let scheduler = ManualScheduler()
        let pacing = ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1)
        let pacer = ProgressPacer(pacing: pacing, tick: 0.01, scheduler: scheduler)
        let registry = SubscriberRegistry(pacer: pacer)
        let queue = registry.makeQueue(for: "x")
        registry.publish(Self.progress(1), to: "x")
        _ = await queue.next()
        // The first delivery (at time 1000 s) set the next due time: 1000 s + the spacing.
        let spacing = Double(pacing.spacing(subscribers: 1, queue: queue.id, delivery: 1)) / 1e9
        let next = Task { await queue.next() }
        try await Self.waitUntilWaiting(queue)
        registry.publish(Self.progress(2), to: "x")
        scheduler.advance(spacing - 0.02)
        #expect(queue.isConsumerWaiting)
        scheduler.advance(0.05)  // a tick falls after the due time
        #expect(Self.bytes(try await withTimeout(10) { await next.value }) == 2)
    }

    static func waitUntilWaiting(_ queue: SubscriberQueue) async throws {
        try await withTimeout(10) { while !queue.isConsumerWaiting && !Task.isCancelled { await Task.yield() } }
    }

    /// Unpaced (few subscribers): every progress wakes the consumer as before.
    @Test func fewSubscribersAreNotPaced() async throws {
        let scheduler = ManualScheduler()
        let registry = SubscriberRegistry(scheduler: scheduler, pacing: ProgressPacing(deliveriesPerSecond: 10_000, minimumSpacing: 0.1))
        let queue = registry.makeQueue(for: "x")
        _ = registry.makeQueue(for: "x")
        _ = registry.makeQueue(for: "x")
        for i in Int64(1)...5 {
            registry.publish(Self.progress(i), to: "x")
            #expect(Self.bytes(await queue.next()) == i)
        }
        #expect(registry.pacer.watchedCount == 0)
        #expect(scheduler.pendingCount == 0)
    }

    /// Engine shutdown (`finish`) hands a waiting consumer its deferred progress, then ends.
    @Test func finishDeliversTheDeferredProgress() async throws {
        let registry = SubscriberRegistry(scheduler: ManualScheduler(), pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1))
        let queue = registry.makeQueue(for: "x")
        registry.publish(Self.progress(1), to: "x")
        _ = await queue.next()
        registry.publish(Self.progress(2), to: "x")
        let waiting = Task { (await queue.next(), await queue.next()) }
        try await Self.waitUntilWaiting(queue)
        #expect(queue.pendingCount == 1)
        queue.finish()
        let (last, end) = try await withTimeout(10) { await waiting.value }
        #expect(Self.bytes(last) == 2)
        #expect(end == nil)
    }
}
