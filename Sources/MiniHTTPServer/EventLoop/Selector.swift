import Basics
import CLinux
import Foundation

/// epoll plus an eventfd used to wake the loop from other threads. Owned by one `EventLoop`.
final class Selector {
    /// epoll user data reserved for the wake-up eventfd (real registrations never use it).
    static let wakeupToken: UInt64 = .max

    let epollFD: Int32
    let eventFD: Int32
    private let events: UnsafeMutableBufferPointer<epoll_event>

    init(maxEvents: Int = 512) throws {
        epollFD = try syscall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            eventFD = try syscall("eventfd") { eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC)) }
        } catch {
            Glibc.close(epollFD)
            throw error
        }
        events = .allocate(capacity: maxEvents)
        try add(fd: eventFD, events: EPOLLIN.rawValue, data: Selector.wakeupToken)
    }

    private var closed = false

    deinit {
        events.deallocate()
        close()
    }

    /// Closes epoll and the eventfd (once). Only the loop thread calls this, when it exits.
    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(eventFD)
        Glibc.close(epollFD)
    }

    func add(fd: Int32, events: UInt32, data: UInt64) throws {
        var ev = epoll_event(events: events, data: epoll_data_t(u64: data))
        try syscall("epoll_ctl(ADD)") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &ev) }
    }

    func remove(fd: Int32) {
        var ev = epoll_event()
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &ev)
    }

    /// Waits up to `timeoutMilliseconds` (-1 = forever) and calls `body(events, data)` for each event.
    func wait(timeoutMilliseconds: Int32, woke: () -> Void, _ body: (UInt32, UInt64) -> Void) throws {
        let n = try syscall("epoll_wait") { () -> Int32 in
            let r = epoll_wait(epollFD, events.baseAddress, Int32(events.count), timeoutMilliseconds)
            return r
        }
        woke()
        for i in 0..<Int(n) {
            let ev = events[i]
            if ev.data.u64 == Selector.wakeupToken {
                var value: UInt64 = 0
                _ = read(eventFD, &value, 8)
                continue
            }
            body(ev.events, ev.data.u64)
        }
    }

    /// Wakes a thread blocked in `wait`. Safe from any thread.
    func wakeup() {
        var one: UInt64 = 1
        _ = write(eventFD, &one, 8)
    }
}
