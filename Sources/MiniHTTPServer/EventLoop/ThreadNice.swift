import CLinux
import Glibc

/// A thread's nice value (Linux: per thread, `setpriority(PRIO_PROCESS, tid, n)`): how the event
/// loops give way to the application's other threads on a saturated machine.
///
/// Only lowering is offered: it needs no privilege, while raising a thread back needs
/// `CAP_SYS_NICE` or an `RLIMIT_NICE` most systems do not grant, so a lowered thread stays lowered.
/// A thread inherits its creator's nice value: threads started from a lowered loop thread (for
/// example a libdispatch worker spawned when the loop queues work and no worker is idle) start
/// lowered too.
public enum ThreadNice {
    /// The highest nice value Linux accepts (the lowest priority).
    public static let maximum = 19

    /// `requested` within 0...`maximum`: below 0 would ask for more than the process's own
    /// priority (privileged), above `maximum` is what the kernel would clamp to anyway.
    public static func clamped(_ requested: Int) -> Int {
        min(max(requested, 0), maximum)
    }

    /// The nice value a thread now at `current` should move to for `requested`: nil when there is
    /// nothing to do (0 requested, or the thread is already at least that nice; never raised).
    public static func target(current: Int, requested: Int) -> Int? {
        let wanted = clamped(requested)
        return wanted > current ? wanted : nil
    }

    /// The calling thread's kernel thread id.
    public static var currentThreadID: Int32 { clinux_gettid() }

    /// The calling thread's nice value.
    public static var current: Int {
        errno = 0
        return Int(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(clinux_gettid())))
    }

    /// Lowers the calling thread (only it, not the process) to `requested` as `target` says.
    /// Returns the errno of a failed `setpriority` (nothing is retried), else nil.
    @discardableResult
    public static func lowerCurrentThread(to requested: Int) -> Int32? {
        guard let wanted = target(current: current, requested: requested) else { return nil }
        let result = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(clinux_gettid()), Int32(wanted))
        return result == 0 ? nil : errno
    }
}
