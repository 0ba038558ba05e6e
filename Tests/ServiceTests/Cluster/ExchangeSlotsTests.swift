import Foundation
import Synchronization
import Testing
@testable import DownloadService

/// `PeerForwarder`'s bound: slots up to the limit at once, then a bounded FIFO of waiters, each
/// waiting a bounded time.
@Suite(.timeLimit(.minutes(1)))
struct ExchangeSlotsTests {
    /// Polls `condition` every 10 ms for at most `seconds`.
    static func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    @Test func upToTheLimitAtOnceThenWaitersInArrivalOrder() async throws {
        let slots = ExchangeSlots(limit: 2, queueLimit: 3, maxWait: 30)
        #expect(await slots.acquire() == nil)
        #expect(await slots.acquire() == nil)
        #expect(slots.running == 2)
        let order = OrderLog()
        var waiting: [Task<ExchangeSlots.Refusal?, Never>] = []
        for n in 0..<3 {
            waiting.append(Task {
                let refusal = await slots.acquire()
                order.append(n)
                return refusal
            })
            // Each is queued before the next arrives: the order is the arrival order.
            #expect(await Self.eventually(within: 10) { slots.waiting == n + 1 })
        }
        // The queue is full: refused at once.
        #expect(await slots.acquire() == .queueFull)
        #expect(slots.running == 2 && slots.waiting == 3)
        // Each release hands its slot to the oldest waiter: never more than the limit running.
        for n in 0..<3 {
            slots.release()
            #expect(await waiting[n].value == nil)
            #expect(slots.running == 2 && slots.waiting == 2 - n)
        }
        #expect(order.values == [0, 1, 2])
        slots.release()
        slots.release()
        #expect(slots.running == 0)
        #expect(await slots.acquire() == nil)
    }

    @Test func aWaiterIsRefusedAfterTheLongestWait() async throws {
        let slots = ExchangeSlots(limit: 1, queueLimit: 4, maxWait: 0.2)
        #expect(await slots.acquire() == nil)
        let started = Date()
        #expect(await slots.acquire() == .waitedTooLong)
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= 0.19 && waited < 10)
        #expect(slots.waiting == 0 && slots.running == 1)
        // The slot it never got is still there to release, then free.
        slots.release()
        #expect(slots.running == 0)
    }

    @Test func aCancelledWaiterLeavesTheQueue() async throws {
        let slots = ExchangeSlots(limit: 1, queueLimit: 4, maxWait: 30)
        #expect(await slots.acquire() == nil)
        let waiter = Task { await slots.acquire() }
        #expect(await Self.eventually(within: 10) { slots.waiting == 1 })
        waiter.cancel()
        #expect(await waiter.value == .cancelled)
        #expect(slots.waiting == 0)
        // Its place is not handed a slot: the release frees it.
        slots.release()
        #expect(slots.running == 0)
    }

    @Test func noQueueRefusesAtTheLimit() async throws {
        let slots = ExchangeSlots(limit: 1, queueLimit: 0, maxWait: 30)
        #expect(await slots.acquire() == nil)
        #expect(await slots.acquire() == .queueFull)
    }
}

/// The order in which waiters got their slots.
final class OrderLog: Sendable {
    private let log = Mutex<[Int]>([])
    func append(_ n: Int) { log.withLock { $0.append(n) } }
    var values: [Int] { log.withLock { $0 } }
}
