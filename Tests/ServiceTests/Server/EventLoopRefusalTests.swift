import Dispatch
import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

/// `EventLoop.executeIfRunning`: work that must run on the loop's thread or not at all is refused
/// once the loop was asked to stop (not run inline on the caller's thread, as `execute` does then),
/// and `stop` of a loop that exited already still completes.
@Suite("EventLoop refusal")
struct EventLoopRefusalTests {
    @Test func aRunningLoopTakesTheWorkOnItsThread() async throws {
        let loop = try EventLoop()
        loop.start(name: "test-refusal-running")
        let onLoop = OneShot<Bool>()
        #expect(loop.executeIfRunning { onLoop.set(loop.inEventLoop) })
        #expect(try await withTimeout(10) { try await onLoop.value() })
        try await withTimeout(10) { await Self.stop(loop) }
    }

    @Test func anExitedLoopRefusesAndNeverRunsTheWork() async throws {
        let loop = try EventLoop()
        loop.start(name: "test-refusal-exited")
        try await withTimeout(10) { await Self.stop(loop) }
        let ran = Mutex(false)
        #expect(!loop.executeIfRunning { ran.withLock { $0 = true } })
        #expect(!ran.withLock { $0 })
        // `execute` keeps running late work inline, so nobody waits forever for it.
        loop.execute { ran.withLock { $0 = true } }
        #expect(ran.withLock { $0 })
    }

    /// Between its stop running on the loop thread and the loop's exit: refused too (a connection
    /// registered then would be dropped with the loop's registrations), while `execute` still
    /// queues (its work runs on the loop thread before it exits).
    @Test func aStoppingLoopRefusesWhileExecuteStillRunsOnItsThread() async throws {
        let loop = try EventLoop()
        loop.start(name: "test-refusal-stopping")
        let release = DispatchSemaphore(value: 0)
        let holding = OneShot<Bool>()
        // The loop is held in this closure while the stop and the probe queue behind it, so they
        // are drained together, the stop first.
        loop.execute {
            holding.set(true)
            _ = release.wait(timeout: .now() + 10)
        }
        _ = try await withTimeout(10) { try await holding.value() }
        let exited = OneShot<Bool>()
        loop.stop { exited.set(true) }
        let refused = OneShot<Bool>()
        let lateRunOnLoop = OneShot<Bool>()
        loop.execute {
            refused.set(!loop.executeIfRunning {})
            loop.execute { lateRunOnLoop.set(loop.inEventLoop) }
        }
        release.signal()
        #expect(try await withTimeout(10) { try await refused.value() })
        #expect(try await withTimeout(10) { try await lateRunOnLoop.value() })
        #expect(try await withTimeout(10) { try await exited.value() })
    }

    @Test func stoppingAnExitedLoopCompletesAtOnce() async throws {
        let loop = try EventLoop()
        loop.start(name: "test-refusal-stop-twice")
        try await withTimeout(10) { await Self.stop(loop) }
        let completed = Mutex(false)
        loop.stop { completed.withLock { $0 = true } }
        #expect(completed.withLock { $0 })
    }

    static func stop(_ loop: EventLoop) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in loop.stop { c.resume() } }
    }
}
