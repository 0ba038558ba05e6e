/// How a download that ran out of disk space waits for it (`--disk-full-wait`). Pure.
///
/// Its kept bytes stay; every `interval` seconds the next attempt looks at the free space of the
/// partial's file system before it asks the origin anything, and goes on once there is room for
/// what is left of the file, or for `stretch` bytes of it (whichever is less): meanwhile the
/// pressure purge frees paused partials and cache files, and an operator may free the rest. A
/// download still waiting after `--disk-full-wait` fails `disk_full`, its bytes kept for a resume.
enum SpaceWait {
    /// Seconds between two looks at the free space (`Retry-After` of the retry, capped by `--retry-max-delay`).
    static let interval = 5.0
    static let retryAfter = "5"
    /// The least time between two looks, whatever `--retry-max-delay` says.
    static let shortestInterval = 0.05
    /// Room worth asking the origin again for, when more than that is left of the file.
    static let stretch: Int64 = 64 << 20

    /// Looks at the free space allowed before the download fails (0: it fails at once), for a
    /// wait of `seconds` with retries at most `maxDelay` apart.
    static func checks(waiting seconds: Double, maxDelay: Double) -> Int {
        guard seconds > 0 else { return 0 }
        return Int((seconds / step(maxDelay: maxDelay)).rounded(.up))
    }

    /// Seconds between two looks: `interval`, capped by `--retry-max-delay` (the retry's delay for
    /// a `Retry-After` of `interval`), and never below `shortestInterval`.
    static func step(maxDelay: Double) -> Double {
        max(shortestInterval, min(interval, maxDelay))
    }

    /// Free bytes the next attempt waits for: what is left of the file (`remaining`, when its
    /// size is known), at most `stretch`, at least one byte.
    static func wanted(remaining: Int64?) -> Int64 {
        max(1, min(remaining ?? stretch, stretch))
    }
}
