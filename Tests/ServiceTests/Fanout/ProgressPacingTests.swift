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

    private static func progress(_ bytes: Int64) -> DownloadEvent {
        var s = DownloadSnapshot(id: "x", url: "u", state: .downloading, storage: .cache, createdAt: Date(), updatedAt: Date())
        s.bytesWritten = bytes
        return .progress(s)
    }

    private static func bytes(_ event: DownloadEvent?) -> Int64? {
        if case .progress(let s)? = event { return s.bytesWritten }
        return nil
    }

    /// A waiting consumer gets the first progress at once, then no progress before it is due (the
    /// latest one when it is), and lifecycle events at once.
    @Test func queueDeliversPacedProgressAndImmediateLifecycle() async throws {
        let clock = Atomic<UInt64>(1_000_000_000)
        // One subscriber at 1 delivery per second: a mean spacing of 1 s (0.5-1.5 s).
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), tick: 0.005,
                                  now: { clock.load(ordering: .relaxed) })
        let registry = SubscriberRegistry(pacer: pacer)
        let queue = registry.makeQueue(for: "x")  // one subscriber
        registry.publish(Self.progress(1), to: "x")
        #expect(Self.bytes(await queue.next()) == 1)  // the first is due at once

        // Not due: the consumer keeps waiting while progress conflates.
        let second = Task { await queue.next() }
        try await withTimeout(10) { while !queue.isConsumerWaiting && !Task.isCancelled { await Task.yield() } }
        registry.publish(Self.progress(2), to: "x")
        registry.publish(Self.progress(3), to: "x")
        #expect(pacer.watchedCount == 1)
        #expect(queue.isConsumerWaiting)
        // A lifecycle event wakes it at once and replaces the older pending progress.
        let s = DownloadSnapshot(id: "x", url: "u", state: .paused, storage: .cache, createdAt: Date(), updatedAt: Date())
        registry.publish(.paused(s), to: "x")
        let woken = try await withTimeout(10) { await second.value }
        if case .paused? = woken {} else { Issue.record("expected paused, got \(String(describing: woken))") }
        #expect(queue.pendingCount == 0)

        // Progress again: pending until the clock passes the due time, then the latest is delivered.
        let third = Task { await queue.next() }
        try await withTimeout(10) { while !queue.isConsumerWaiting && !Task.isCancelled { await Task.yield() } }
        registry.publish(Self.progress(4), to: "x")
        registry.publish(Self.progress(5), to: "x")
        #expect(queue.isConsumerWaiting)
        clock.add(2_000_000_000, ordering: .relaxed)
        let delivered = try await withTimeout(10) { await third.value }
        #expect(Self.bytes(delivered) == 5)
    }

    /// Unpaced (few subscribers): every progress wakes the consumer as before.
    @Test func fewSubscribersAreNotPaced() async throws {
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 10_000, minimumSpacing: 0.1))
        let registry = SubscriberRegistry(pacer: pacer)
        let queue = registry.makeQueue(for: "x")
        _ = registry.makeQueue(for: "x")
        _ = registry.makeQueue(for: "x")
        for i in Int64(1)...5 {
            registry.publish(Self.progress(i), to: "x")
            #expect(Self.bytes(await queue.next()) == i)
        }
        #expect(pacer.watchedCount == 0)
    }

    /// Engine shutdown (`finish`) hands a waiting consumer its deferred progress, then ends.
    @Test func finishDeliversTheDeferredProgress() async throws {
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), now: { 5_000_000_000 })
        let registry = SubscriberRegistry(pacer: pacer)
        let queue = registry.makeQueue(for: "x")
        registry.publish(Self.progress(1), to: "x")
        _ = await queue.next()
        registry.publish(Self.progress(2), to: "x")
        let waiting = Task { (await queue.next(), await queue.next()) }
        try await withTimeout(10) { while !queue.isConsumerWaiting && !Task.isCancelled { await Task.yield() } }
        #expect(queue.pendingCount == 1)
        queue.finish()
        let (last, end) = try await withTimeout(10) { await waiting.value }
        #expect(Self.bytes(last) == 2)
        #expect(end == nil)
    }
}

/// `newestProgress`: a consumer that fell behind gets the download's newest progress, never across
/// a lifecycle event.
@Suite struct NewestProgressTests {
    private static let date = Date(timeIntervalSince1970: 1_800_000_000)

    private static func progress(_ bytes: Int64) -> DownloadEvent {
        var s = DownloadSnapshot(id: "d", url: "u", state: .downloading, storage: .cache, createdAt: date, updatedAt: date)
        s.bytesWritten = bytes
        return .progress(s)
    }

    @Test func newestProgressReplacesPendingProgressButNotAcrossLifecycle() async {
        let registry = SubscriberRegistry(pacer: ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 0)))
        let queue = registry.makeQueue(for: "d")
        let other = registry.makeQueue(for: "d")
        registry.publish(Self.progress(1), to: "d")
        #expect(await queue.next() == Self.progress(1))
        #expect(queue.newestProgress() == Self.progress(1))  // nothing newer: the same one
        registry.publish(Self.progress(2), to: "d")
        registry.publish(Self.progress(3), to: "d")
        #expect(queue.newestProgress() == Self.progress(3))
        #expect(queue.pendingCount == 0)  // the pending one was taken

        registry.publish(Self.progress(4), to: "d")
        let s = DownloadSnapshot(id: "d", url: "u", state: .paused, storage: .cache, createdAt: Date(), updatedAt: Date())
        registry.publish(.paused(s), to: "d")
        #expect(queue.newestProgress() == nil)  // a lifecycle event is pending: keep order
        #expect(queue.pendingCount == 2)
        #expect(other.newestProgress() == nil)
        // After the lifecycle event nothing is "newest" until the next progress.
        _ = await queue.next()
        _ = await queue.next()
        #expect(queue.newestProgress() == nil)
        registry.publish(Self.progress(5), to: "d")
        #expect(queue.newestProgress() == Self.progress(5))
    }
}
