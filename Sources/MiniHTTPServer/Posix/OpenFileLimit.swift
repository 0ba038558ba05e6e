import Foundation

/// The process's open-file limit (RLIMIT_NOFILE). Every client connection costs a descriptor, so a
/// server meant for many connections (e.g. 10 000 progress streams) raises the soft limit first.
public enum OpenFileLimit {
    /// Raises the soft limit to the hard limit; returns the limits now in force (nil if they cannot
    /// be read). Harmless when already raised; never lowers anything.
    @discardableResult
    public static func raiseToHardLimit() -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }
}
