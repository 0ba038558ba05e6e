import Glibc

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`).
@inlinable
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Monotonic time in seconds (`CLOCK_MONOTONIC`).
@inlinable
public func monotonicSeconds() -> Double {
    Double(monotonicNanoseconds()) / 1e9
}

/// CPU time the calling thread has used, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
@inlinable
public func threadCPUNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
