import CLinux
import Foundation
import Glibc
import Synchronization

/// Memory and disk pressure on Linux, sampled every `interval` seconds:
/// - PSI: `some avg10` at or above `memoryThreshold` percent, of this process's cgroup (v2
///   `memory.pressure`: in a container, the pressure its own limit makes, not another pod's) or,
///   without one, of the machine (`/proc/pressure/memory`). (Polled rather than a PSI trigger:
///   unprivileged triggers need a window that is a multiple of 2 s, and a poll at that period
///   gives the same answer without a blocked thread.)
/// - cgroup v2 `memory.events`: the `high` or `max` counter grew since the previous sample.
/// - cgroup v1 `memory.pressure_level`: a `medium` notification (eventfd registered through
///   `cgroup.event_control`) arrived since the previous sample.
/// - free space: `statvfs` of the asked path.
/// Files that are missing (no PSI, no cgroup) simply never report pressure.
final class LinuxPressureMonitor: PressureMonitor, @unchecked Sendable {
    private let memoryThreshold: Double
    private let psiPath: String
    private let memoryEventsPath: String?
    /// eventfd of the v1 pressure-level registration, or -1.
    private let v1EventFD: Int32
    private let lastEvents = Mutex<(high: UInt64, max: UInt64)?>(nil)
    private let queue = DispatchQueue(label: "download-engine.pressure")
    private let timerLock = NSLock()
    private var timer: DispatchSourceTimer?  // Guarded by `timerLock`.

    init(memoryThreshold: Double, procRoot: String = "/proc", cgroupRoot: String = "/sys/fs/cgroup") {
        self.memoryThreshold = memoryThreshold
        let groups = (try? String(contentsOfFile: procRoot + "/self/cgroup", encoding: .utf8))
            .map(PressureParsers.cgroups) ?? (v2: nil, v1Memory: nil)
        var eventsPath: String?
        var groupPSI: String?
        if let v2 = groups.v2 {
            // The group's own directory, or (inside a container, where it is usually mounted as the root) the root.
            let directories = [cgroupRoot + (v2 == "/" ? "" : v2), cgroupRoot]
            eventsPath = directories.map { $0 + "/memory.events" }.first { FileManager.default.isReadableFile(atPath: $0) }
            groupPSI = directories.map { $0 + "/memory.pressure" }.first { FileManager.default.isReadableFile(atPath: $0) }
        }
        psiPath = groupPSI ?? procRoot + "/pressure/memory"
        memoryEventsPath = eventsPath
        var efd: Int32 = -1
        if eventsPath == nil, let v1 = groups.v1Memory {
            // Inside a container the group's own directory is usually mounted as the root.
            for dir in [cgroupRoot + "/memory" + v1, cgroupRoot + "/memory"] {
                efd = Self.registerPressureLevel(directory: dir)
                if efd >= 0 { break }
            }
        }
        v1EventFD = efd
        if let eventsPath, let text = try? String(contentsOfFile: eventsPath, encoding: .utf8) {
            lastEvents.withLock { $0 = PressureParsers.memoryEvents(text) }
        }
    }

    deinit {
        stop()
        if v1EventFD >= 0 { close(v1EventFD) }
    }

    /// cgroup v1: asks for `medium` pressure-level notifications on a fresh eventfd; -1 if refused.
    private static func registerPressureLevel(directory: String) -> Int32 {
        let level = open(directory + "/memory.pressure_level", O_RDONLY | O_CLOEXEC)
        guard level >= 0 else { return -1 }
        defer { close(level) }
        let control = open(directory + "/cgroup.event_control", O_WRONLY | O_CLOEXEC)
        guard control >= 0 else { return -1 }
        defer { close(control) }
        let efd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard efd >= 0 else { return -1 }
        let line = "\(efd) \(level) medium"
        let written = line.withCString { write(control, $0, strlen($0)) }
        guard written == line.utf8.count else {
            close(efd)
            return -1
        }
        return efd
    }

    func memoryUnderPressure() -> Bool {
        var pressed = false
        if let text = try? String(contentsOfFile: psiPath, encoding: .utf8),
           let avg10 = PressureParsers.someAvg10(text), avg10 >= memoryThreshold {
            pressed = true
        }
        if let path = memoryEventsPath, let text = try? String(contentsOfFile: path, encoding: .utf8),
           let now = PressureParsers.memoryEvents(text) {
            let grew = lastEvents.withLock { last -> Bool in
                defer { last = now }
                guard let before = last else { return false }
                return now.high > before.high || now.max > before.max
            }
            pressed = pressed || grew
        }
        if v1EventFD >= 0 {
            var count: UInt64 = 0
            if read(v1EventFD, &count, 8) == 8, count > 0 { pressed = true }
        }
        return pressed
    }

    func space(of path: String) -> DiskSpace? { DiskSpace.of(path) }

    func start(interval: Double, tick: @escaping @Sendable () -> Void) {
        let source = DispatchSource.makeTimerSource(queue: queue)
        let period = max(0.1, interval)
        source.schedule(deadline: .now() + period, repeating: period, leeway: .milliseconds(200))
        source.setEventHandler(handler: tick)
        timerLock.lock()
        timer?.cancel()
        timer = source
        timerLock.unlock()
        source.resume()
    }

    func stop() {
        timerLock.lock()
        timer?.cancel()
        timer = nil
        timerLock.unlock()
    }
}
