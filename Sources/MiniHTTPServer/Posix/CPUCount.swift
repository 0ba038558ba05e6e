import Foundation
import Glibc

/// The CPUs this process may use: the online ones, or fewer when its affinity mask (a cpuset,
/// `taskset`) or a cgroup v2 CPU quota (`cpu.max`: a container's CPU limit, on its cgroup or an
/// ancestor's) allows fewer. A pod limited to 2 CPUs on a 64-core node counts 2, not 64.
enum CPUCount {
    static func usable() -> Int {
        let online = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        return max(1, [online, affinity(), quota()].compactMap { $0 }.min() ?? online)
    }

    /// CPUs in the process's affinity mask (`Cpus_allowed_list` of `/proc/self/status`); nil when unknown.
    static func affinity(status: String = "/proc/self/status") -> Int? {
        guard let text = try? String(contentsOfFile: status, encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }) else { return nil }
        return cpus(inList: line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces))
    }

    /// A CPU list (`0-3,8,10-11`) → how many CPUs it names; nil for a text it is not. Pure.
    static func cpus(inList list: String) -> Int? {
        var count = 0
        for part in list.split(separator: ",") {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
            switch bounds.count {
            case 1: guard bounds[0] != nil else { return nil }; count += 1
            case 2:
                guard let low = bounds[0], let high = bounds[1], low <= high else { return nil }
                count += high - low + 1
            default: return nil
            }
        }
        return count > 0 ? count : nil
    }

    /// The smallest CPU quota on the way from this process's cgroup (v2) to the root; nil when none.
    static func quota(root: String = "/sys/fs/cgroup", cgroupFile: String = "/proc/self/cgroup") -> Int? {
        guard let text = try? String(contentsOfFile: cgroupFile, encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else { return nil }
        var path = String(line.dropFirst(3))
        var smallest: Int?
        for _ in 0..<64 {
            let file = root + (path == "/" ? "" : path) + "/cpu.max"
            if let limit = (try? String(contentsOfFile: file, encoding: .utf8)).flatMap(cpus(fromCPUMax:)) {
                smallest = min(smallest ?? limit, limit)
            }
            guard path != "/", !path.isEmpty else { break }
            path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
            if path.isEmpty { path = "/" }
        }
        return smallest
    }

    /// `cpu.max` (`"<quota> <period>"`, or `"max <period>"`) → the CPUs it allows, rounded up;
    /// nil for no limit or a text it is not. Pure.
    static func cpus(fromCPUMax text: String) -> Int? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let quota = Double(fields[0]), let period = Double(fields[1]), quota > 0, period > 0,
              quota.isFinite, period.isFinite else { return nil }
        return max(1, Int((quota / period).rounded(.up)))
    }
}
