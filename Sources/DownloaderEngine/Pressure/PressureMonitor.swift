import CLinux
import Foundation
import Glibc

/// Free and total bytes of one file system, and which file system it is.
struct DiskSpace: Sendable, Equatable {
    var free: Int64
    var total: Int64
    /// `f_fsid`: equal for two paths on the same file system.
    var fileSystem: UInt64
    /// The file system keeps its files in memory (tmpfs, ramfs): deleting them frees memory.
    var inMemory = false
    /// Blocks reserved for root that this process may write too (ext2/3/4, and it runs as the
    /// host's root, ext4's default reserved-blocks user): a root process fills them before its
    /// writes fail.
    var reservedForUs: Int64 = 0

    /// Bytes this process may still write (`free` counts what unprivileged users may).
    var writable: Int64 { free + reservedForUs }

    /// `statvfs` of `path` (`free`: blocks available to unprivileged users); nil when it fails.
    static func of(_ path: String) -> DiskSpace? {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return nil }
        var kind = statfs()
        let type = statfs(path, &kind) == 0 ? Int64(kind.f_type) : nil
        let inMemory = type.map(memoryFileSystems.contains) ?? false
        let reserved = type == ext4Magic && isHostRoot && s.f_bfree > s.f_bavail ? UInt64(s.f_bfree - s.f_bavail) : 0
        let free = bytes(UInt64(s.f_bavail), UInt64(s.f_frsize))
        return DiskSpace(free: free, total: bytes(UInt64(s.f_blocks), UInt64(s.f_frsize)), fileSystem: UInt64(s.f_fsid),
                         inMemory: inMemory, reservedForUs: min(bytes(reserved, UInt64(s.f_frsize)), .max - free))
    }

    /// `blocks` of `size` bytes, at most Int64.max: a file system that reports 8 EiB or more free
    /// (network file systems do) never traps.
    static func bytes(_ blocks: UInt64, _ size: UInt64) -> Int64 {
        let (product, overflow) = blocks.multipliedReportingOverflow(by: size)
        return overflow || product > UInt64(Int64.max) ? .max : Int64(product)
    }

    /// `free` grown by `bytes` (none when negative), at most Int64.max: a volume reporting ~8 EiB
    /// free never traps when purged bytes are counted back.
    static func adding(_ bytes: Int64, to free: Int64) -> Int64 {
        let (sum, overflow) = free.addingReportingOverflow(max(0, bytes))
        return overflow ? .max : sum
    }

    /// `f_type` of ext2, ext3 and ext4 (linux/magic.h): the file systems that reserve blocks for root.
    static let ext4Magic: Int64 = 0xEF53

    /// Root as ext4 knows it (uid 0 of the initial user namespace, the default reserved-blocks
    /// user): root of a user namespace ("rootless" containers) maps to another uid, outside the reserve.
    static let isHostRoot: Bool = {
        guard geteuid() == 0, let map = try? String(contentsOfFile: "/proc/self/uid_map", encoding: .utf8) else { return false }
        return map.split(whereSeparator: \.isWhitespace) == ["0", "0", "4294967295"]
    }()

    /// `f_type` of tmpfs and ramfs (linux/magic.h).
    static let memoryFileSystems: Set<Int64> = [0x0102_1994, 0x8584_58f6]
}

/// Where the engine learns about memory and disk pressure. Injected, so tests raise pressure
/// deterministically (`DownloadEngine.init(…pressure:)`); `LinuxPressureMonitor` in production.
///
/// The engine asks for samples (off its lock) whenever the monitor ticks, before each attempt starts,
/// and purges under its lock from what the samples say.
protocol PressureMonitor: AnyObject, Sendable {
    /// True while memory is under pressure.
    func memoryUnderPressure() -> Bool
    /// Free and total bytes of the file system holding `path`; nil when unknown.
    func space(of path: String) -> DiskSpace?
    /// Starts calling `tick` about every `interval` seconds (on the monitor's own queue) until `stop()`.
    func start(interval: Double, tick: @escaping @Sendable () -> Void)
    func stop()
}

/// Free-space thresholds below which a storage area counts as low.
struct DiskPressure: Sendable {
    var minFreeBytes: Int64 = 1 << 30
    var minFreeFraction: Double = 0.05

    func isLow(free: Int64, total: Int64) -> Bool {
        free < minFreeBytes || (total > 0 && Double(free) < minFreeFraction * Double(total))
    }

    /// Never low.
    static let disabled = DiskPressure(minFreeBytes: 0, minFreeFraction: 0)
}

/// Real free space, never memory pressure, and no ticks: the engine checks only before attempts.
/// The default for engines built with injected parts (tests).
final class DiskOnlyPressureMonitor: PressureMonitor {
    func memoryUnderPressure() -> Bool { false }
    func space(of path: String) -> DiskSpace? { DiskSpace.of(path) }
    func start(interval: Double, tick: @escaping @Sendable () -> Void) {}
    func stop() {}
}
