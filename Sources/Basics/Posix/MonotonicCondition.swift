import Glibc

/// A lock with a condition whose timed waits run on `CLOCK_MONOTONIC`.
///
/// Foundation's `NSCondition.wait(until:)` (and `NSLock.lock(before:)`) wait until a `Date`, an
/// absolute `CLOCK_REALTIME` instant: when the wall clock steps back an hour (NTP, an operator, a VM
/// resumed), a 5 ms wait lasts an hour and one step forward ends every wait at once. Waits here
/// are measured in seconds from now on the monotonic clock, which no step moves.
public final class MonotonicCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Holding the lock: waits for a signal (or a spurious wake-up).
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Holding the lock: waits for a signal until `deadline` (`MonotonicCondition.now()` seconds);
    /// false once the deadline passed.
    @discardableResult
    public func wait(until deadline: Double) -> Bool {
        guard deadline > Self.now() else { return false }
        let whole = deadline.rounded(.down)
        var at = timespec(tv_sec: Int(min(whole, Double(Int32.max))), tv_nsec: Int((deadline - whole) * 1e9))
        return pthread_cond_timedwait(condition, mutex, &at) != ETIMEDOUT
    }

    /// Holding the lock: waits for a signal at most `seconds`; false when the time ran out.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        wait(until: Self.now() + max(0, seconds))
    }

    public func signal() { pthread_cond_signal(condition) }
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// The monotonic clock's reading in seconds (the deadlines of `wait(until:)`).
    public static func now() -> Double { monotonicSeconds() }
}
