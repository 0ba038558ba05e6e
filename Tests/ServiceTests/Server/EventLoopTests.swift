import CLinux
import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

@Suite("EventLoop")
struct EventLoopTests {
    final class Recorder: Selectable, @unchecked Sendable {
        var events: [UInt32] = []
        func handleEvent(_ events: UInt32) { self.events.append(events) }
    }

    @Test func staleRegistrationNeverReachesTheNewOwnerOfAReusedDescriptor() throws {
        let loop = try EventLoop()  // not started: dispatch is called directly, as the loop would
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let old = Recorder(), new = Recorder()
        let oldID = try loop.register(fd: fds[0], events: EPOLLIN.rawValue, handler: old)
        loop.deregister(fd: fds[0])
        let newID = try loop.register(fd: fds[0], events: EPOLLIN.rawValue, handler: new)  // same fd number
        #expect(oldID != newID)
        loop.dispatch(EPOLLIN.rawValue, data: EventLoop.eventData(fd: fds[0], registrationID: oldID))
        #expect(old.events.isEmpty && new.events.isEmpty)
        loop.dispatch(EPOLLIN.rawValue, data: EventLoop.eventData(fd: fds[0], registrationID: newID))
        #expect(new.events == [EPOLLIN.rawValue])
        loop.deregister(fd: fds[0])
        close(fds[0])
    }

    @Test func executeRunsOnTheLoopThreadAndTasksPreferringTheLoopRunThere() async throws {
        let loop = try EventLoop()
        loop.start(name: "test-loop")
        let onLoop = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            loop.execute { c.resume(returning: loop.inEventLoop) }
        }
        #expect(onLoop)
        let taskOnLoop = await Task(executorPreference: loop) { loop.inEventLoop }.value
        #expect(taskOnLoop)
        #expect(!loop.inEventLoop)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in loop.stop { c.resume() } }
        // After stopping, work still runs (inline) instead of being lost.
        let ranAfterStop = Mutex(false)
        loop.execute { ranAfterStop.withLock { $0 = true } }
        #expect(ranAfterStop.withLock { $0 })
    }
}
