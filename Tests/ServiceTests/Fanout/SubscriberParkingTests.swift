import Foundation
import Testing
@testable import DownloaderEngine

/// Which subscriber queues a progress visits: `SubscriberParking` as a table, `isParked` against
/// the queue's decisions, and the registry keeping a paced queue parked between ticks.
@Suite struct SubscriberParkingTests {
    enum Step: Sendable {
        case add(UInt64), remove(UInt64), park(UInt64), unpark(UInt64)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var steps: [Step]
        /// Ids a progress visits afterwards, and ids parked.
        var awake: Set<UInt64>
        var parked: Set<UInt64>
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "a new queue is awake", steps: [.add(1), .add(2)], awake: [1, 2], parked: []),
        Row(name: "parked: progress skips it", steps: [.add(1), .add(2), .park(1)], awake: [2], parked: [1]),
        Row(name: "unparked: visited again", steps: [.add(1), .add(2), .park(1), .unpark(1)], awake: [1, 2], parked: []),
        Row(name: "removed while parked: gone", steps: [.add(1), .add(2), .park(1), .remove(1)], awake: [2], parked: []),
        Row(name: "removed while awake: gone", steps: [.add(1), .add(2), .park(1), .remove(2)], awake: [], parked: [1]),
        Row(name: "parking an unknown or removed queue does not bring it back", steps: [.add(1), .remove(1), .park(1), .unpark(1)],
            awake: [], parked: []),
        Row(name: "parking twice, unparking once: awake", steps: [.add(1), .park(1), .park(1), .unpark(1)], awake: [1], parked: []),
    ]

    @Test(arguments: rows)
    func parking(_ row: Row) {
        var parking = SubscriberParking<String>()
        for step in row.steps {
            switch step {
            case .add(let id): parking.add(id, "q\(id)")
            case .remove(let id): parking.remove(id)
            case .park(let id): parking.park(id)
            case .unpark(let id): parking.unpark(id)
            }
        }
        #expect(Set(parking.awake.keys) == row.awake)
        #expect(Set(parking.parked.keys) == row.parked)
        #expect(parking.count == row.awake.count + row.parked.count)
        #expect(Set(parking.all) == Set((row.awake.union(row.parked)).map { "q\($0)" }))
        #expect(parking.isEmpty == (parking.count == 0))
    }

    // MARK: isParked: a parked queue is one that a progress offer cannot change

    static let now: UInt64 = 10_000_000_000
    static let later = now + 5_000_000_000
    static let pace = ProgressPace(now: now, pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), subscribers: 1)

    static func state(_ pending: [DownloadEvent] = [], waits: Bool, finished: Bool = false, dueAt: UInt64, deferred: Bool) -> SubscriberQueueState {
        var s = SubscriberQueueState(key: 7)
        s.pending = pending
        s.consumerWaits = waits
        s.started = true
        s.finished = finished
        s.pacing.dueAt = dueAt
        s.pacing.deliveries = 1
        s.pacing.deferred = deferred
        return s
    }

    struct ParkedRow: Sendable, CustomTestStringConvertible {
        var name: String
        var state: SubscriberQueueState
        var parked: Bool
        var testDescription: String { name }
    }

    static let parkedRows: [ParkedRow] = [
        ParkedRow(name: "waits for the tick", state: state(waits: true, dueAt: later, deferred: true), parked: true),
        ParkedRow(name: "waits for the tick with its progress pending", state: state([SubscriberQueueStateTests.p(1)], waits: true, dueAt: later, deferred: true),
                  parked: true),
        ParkedRow(name: "waits, not deferred: a progress wakes or defers it", state: state(waits: true, dueAt: later, deferred: false), parked: false),
        ParkedRow(name: "busy: reads the newest progress when it asks", state: state(waits: false, dueAt: later, deferred: false), parked: true),
        ParkedRow(name: "busy with a lifecycle event pending", state: state([SubscriberQueueStateTests.paused], waits: false, dueAt: 0, deferred: false),
                  parked: true),
        ParkedRow(name: "finished", state: state(waits: true, finished: true, dueAt: later, deferred: true), parked: true),
        ParkedRow(name: "waits, due, not deferred: a progress wakes it", state: state(waits: true, dueAt: 0, deferred: false), parked: false),
    ]

    /// `isParked` as a table, and the reason skipping is safe: a progress offered to a parked queue
    /// changes neither the state nor the consumer (what it would have taken, the consumer's ask or
    /// the tick reads from the record).
    @Test(arguments: parkedRows)
    func isParked(_ row: ParkedRow) {
        #expect(row.state.isParked == row.parked)
        var offered = row.state
        let action = offered.offer(RecordedProgress(event: SubscriberQueueStateTests.p(9), version: 9), pace: Self.pace)
        let changes = action != QueueAction() || offered != row.state
        #expect(changes == !row.parked)
    }

    // MARK: The registry

    private static func progress(_ bytes: Int64) -> DownloadEvent { ProgressPacingTests.progress(bytes) }
    private static func bytes(_ event: DownloadEvent?) -> Int64? { ProgressPacingTests.bytes(event) }
    private static func waitUntilWaiting(_ queue: SubscriberQueue) async throws { try await ProgressPacingTests.waitUntilWaiting(queue) }

    private static func paused() -> DownloadEvent {
        .paused(DownloadSnapshot(id: "x", url: "u", state: .paused, storage: .cache, createdAt: Date(), updatedAt: Date()))
    }

    /// Paced: a consumer that asks before its due time waits for the tick at once, so no progress
    /// visits its queue; the tick hands it the newest; a lifecycle event reaches it at once, parked
    /// or not, and leaves it parked.
    @Test func aPacedWaitingQueueIsParkedUntilItsTick() async throws {
        let scheduler = ManualScheduler()
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), tick: 0.005, scheduler: scheduler)
        let registry = SubscriberRegistry(pacer: pacer)
        let queue = registry.makeQueue(for: "x")
        registry.publish(Self.progress(1), to: "x")  // its consumer has not asked yet: parked
        #expect(registry.awakeCount(of: "x") == 0)
        #expect(Self.bytes(await queue.next()) == 1)  // the record, due at once
        #expect(registry.awakeCount(of: "x") == 0)

        let second = Task { await queue.next() }
        try await Self.waitUntilWaiting(queue)
        #expect(registry.awakeCount(of: "x") == 0)  // not due: waits for the tick
        #expect(pacer.watchedCount == 1)
        registry.publish(Self.progress(2), to: "x")
        registry.publish(Self.progress(3), to: "x")
        #expect(pacer.watchedCount == 1)
        #expect(queue.isConsumerWaiting)
        // Up to the tick that hands it over (the due time is at most 1.5 s away), not beyond: the
        // next progress must not be due yet.
        for _ in 0..<200 where queue.isConsumerWaiting { scheduler.advance(0.01) }
        #expect(Self.bytes(try await withTimeout(10) { await second.value }) == 3)
        #expect(registry.awakeCount(of: "x") == 0)  // busy: reads the newest when it asks

        let third = Task { await queue.next() }
        try await Self.waitUntilWaiting(queue)
        registry.publish(Self.progress(4), to: "x")
        #expect(registry.awakeCount(of: "x") == 0)
        registry.publish(Self.paused(), to: "x")  // a lifecycle event: at once, parked or not
        let woken = try await withTimeout(10) { await third.value }
        if case .paused? = woken {} else { Issue.record("expected paused, got \(String(describing: woken))") }
        #expect(registry.awakeCount(of: "x") == 0)
        // Due later and nothing newer: the tick finds nothing, and the queue waits awake for the next progress.
        let fourth = Task { await queue.next() }
        try await Self.waitUntilWaiting(queue)
        for _ in 0..<400 where registry.awakeCount(of: "x") == 0 { scheduler.advance(0.01) }
        #expect(registry.awakeCount(of: "x") == 1)
        #expect(queue.isConsumerWaiting)
        registry.publish(Self.progress(5), to: "x")
        #expect(Self.bytes(try await withTimeout(10) { await fourth.value }) == 5)
        #expect(registry.awakeCount(of: "x") == 0)
    }

    /// Many paced subscribers: after they have asked, a progress visits none of them, also the first
    /// one after a lifecycle event, and every one still gets the newest progress by its tick.
    @Test func progressVisitsOnlyAwakeQueues() async throws {
        let scheduler = ManualScheduler()
        let pacer = ProgressPacer(pacing: ProgressPacing(deliveriesPerSecond: 100, minimumSpacing: 0.1), tick: 0.005, scheduler: scheduler)
        let registry = SubscriberRegistry(pacer: pacer)
        let queues = (0..<50).map { _ in registry.makeQueue(for: "x") }  // a mean spacing of 0.5 s
        registry.publish(Self.progress(1), to: "x")
        #expect(registry.awakeCount(of: "x") == 0)
        for queue in queues { #expect(Self.bytes(await queue.next()) == 1) }
        let waiting = queues.map { queue in Task { await queue.next() } }
        for queue in queues { try await Self.waitUntilWaiting(queue) }
        #expect(registry.awakeCount(of: "x") == 0)
        registry.publish(Self.paused(), to: "x")
        for task in waiting {
            let event = try await withTimeout(10) { await task.value }
            if case .paused? = event {} else { Issue.record("expected paused, got \(String(describing: event))") }
        }
        let again = queues.map { queue in Task { await queue.next() } }
        for queue in queues { try await Self.waitUntilWaiting(queue) }
        #expect(registry.awakeCount(of: "x") == 0)  // the first progress after the lifecycle event visits none
        for bytes in Int64(2)...9 { registry.publish(Self.progress(bytes), to: "x") }
        #expect(registry.awakeCount(of: "x") == 0)
        scheduler.advance(1)  // every due time has passed (at most 0.75 s)
        for task in again { #expect(Self.bytes(try await withTimeout(10) { await task.value }) == 9) }
        #expect(registry.awakeCount(of: "x") == 0)
    }

    /// Unpaced: consumers that are busy when a progress is published are not visited; each reads
    /// the newest progress when it asks, and one that waits is visited and woken.
    @Test func busyConsumersReadTheNewestProgressWhenTheyAsk() async throws {
        let registry = SubscriberRegistry(scheduler: ManualScheduler(), pacing: ProgressPacing(deliveriesPerSecond: 0))
        let queues = (0..<20).map { _ in registry.makeQueue(for: "x") }
        for bytes in Int64(1)...5 {
            registry.publish(Self.progress(bytes), to: "x")
            #expect(registry.awakeCount(of: "x") == 0)
        }
        for queue in queues { #expect(Self.bytes(await queue.next()) == 5) }
        let waiting = queues.map { queue in Task { await queue.next() } }
        for queue in queues { try await Self.waitUntilWaiting(queue) }
        #expect(registry.awakeCount(of: "x") == 20)
        registry.publish(Self.progress(6), to: "x")
        for task in waiting { #expect(Self.bytes(try await withTimeout(10) { await task.value }) == 6) }
        #expect(registry.awakeCount(of: "x") == 0)
        #expect(registry.pacer.watchedCount == 0)
    }
}
