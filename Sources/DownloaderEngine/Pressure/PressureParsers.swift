/// Pure parsers for the kernel's pressure files (table-tested, no I/O).
enum PressureParsers {
    /// `some avg10` of a PSI file (`/proc/pressure/memory`):
    /// `some avg10=1.23 avg60=… avg300=… total=…` (percent of wall time some task stalled on memory).
    static func someAvg10(_ text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("some ") {
            for field in line.split(separator: " ") where field.hasPrefix("avg10=") {
                return Double(field.dropFirst(6))
            }
        }
        return nil
    }

    /// The `high` and `max` counters of a cgroup v2 `memory.events` file (`low N`, `high N`, `max N`,
    /// `oom N`, `oom_kill N` lines): how often the group was throttled at `memory.high` or hit `memory.max`.
    static func memoryEvents(_ text: String) -> (high: UInt64, max: UInt64)? {
        var high: UInt64?
        var max: UInt64?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let value = UInt64(parts[1]) else { continue }
            if parts[0] == "high" { high = value }
            if parts[0] == "max" { max = value }
        }
        guard let high, let max else { return nil }
        return (high, max)
    }

    /// The process's cgroups from `/proc/self/cgroup`: the v2 path (`0::/path`) and the v1 memory
    /// controller's path (`N:memory:/path`, or a comma list containing `memory`).
    static func cgroups(_ text: String) -> (v2: String?, v1Memory: String?) {
        var v2: String?
        var v1: String?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            if parts[0] == "0" && parts[1].isEmpty { v2 = String(parts[2]) }
            if parts[1].split(separator: ",").contains("memory") { v1 = String(parts[2]) }
        }
        return (v2, v1)
    }
}
