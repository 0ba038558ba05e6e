import Basics
import Foundation
import Testing

/// `MonotonicCondition`: timed waits measured on `CLOCK_MONOTONIC` (a wall-clock step moves none).
@Suite("Basics: MonotonicCondition")
struct MonotonicConditionTests {
    /// A timed wait lasts its time. Its deadline is a monotonic reading (seconds since boot): were
    /// the condition's clock the wall clock, that instant would lie in 1970 and every wait would
    /// time out at once.
    @Test func aTimedWaitLastsItsTimeOnTheMonotonicClock() {
        let condition = MonotonicCondition()
        let started = MonotonicCondition.now()
        condition.lock()
        let signalled = condition.wait(seconds: 0.2)
        condition.unlock()
        let waited = MonotonicCondition.now() - started
        #expect(!signalled)
        #expect(waited >= 0.19 && waited < 10, "waited \(waited) s")
        condition.lock()
        #expect(!condition.wait(until: MonotonicCondition.now() - 1), "a deadline passed already")
        condition.unlock()
    }

    @Test func aSignalEndsTheWait() {
        let condition = MonotonicCondition()
        let waiting = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var told = false
        nonisolated(unsafe) var signalled = false
        Thread {
            condition.lock()
            waiting.signal()
            while !told, condition.wait(seconds: 30) {}
            signalled = told
            condition.unlock()
            done.signal()
        }.start()
        #expect(waiting.wait(timeout: .now() + 10) == .success)
        let started = MonotonicCondition.now()
        condition.withLock { told = true; condition.signal() }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(condition.withLock { signalled })
        #expect(MonotonicCondition.now() - started < 10)
    }
}
