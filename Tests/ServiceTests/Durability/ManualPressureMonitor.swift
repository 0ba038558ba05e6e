import Foundation
@testable import DownloaderEngine

/// A pressure monitor the test drives: memory pressure and free space per area are set by hand, and
/// `fire()` runs the engine's pressure check synchronously (no timers, no sleeps).
final class ManualPressureMonitor: PressureMonitor, @unchecked Sendable {
    private let lock = NSLock()
    private var memory = false
    /// Free bytes and file-system id by directory prefix (longest match); others are roomy.
    private var spaces: [String: DiskSpace] = [:]
    private var tick: (@Sendable () -> Void)?

    func setMemoryPressure(_ on: Bool) { lock.withLock { memory = on } }

    func setSpace(_ path: String, free: Int64, fileSystem: UInt64 = 1, inMemory: Bool = false, reservedForUs: Int64 = 0) {
        lock.withLock {
            spaces[path] = DiskSpace(free: free, total: 1 << 40, fileSystem: fileSystem, inMemory: inMemory, reservedForUs: reservedForUs)
        }
    }

    /// Runs one pressure check now, as a monitor tick would.
    func fire() { lock.withLock { tick }?() }

    func memoryUnderPressure() -> Bool { lock.withLock { memory } }

    func space(of path: String) -> DiskSpace? {
        lock.withLock {
            spaces.filter { path.hasPrefix($0.key) }.max { $0.key.count < $1.key.count }?.value
                ?? DiskSpace(free: 1 << 40, total: 1 << 41, fileSystem: 1)
        }
    }

    func start(interval: Double, tick: @escaping @Sendable () -> Void) { lock.withLock { self.tick = tick } }

    func stop() {}
}

/// Collects purge events (delivered on an engine queue) and waits for a count, bounded.
final class PurgeLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var events: [PurgeEvent] = []

    func append(_ event: PurgeEvent) {
        condition.lock(); events.append(event); condition.broadcast(); condition.unlock()
    }

    /// The first `count` events, or whatever arrived after `timeout` seconds.
    func wait(for count: Int, timeout: Double = 5) async throws -> [PurgeEvent] {
        try await onThread { [self] in
            let deadline = Date().addingTimeInterval(timeout)
            condition.lock(); defer { condition.unlock() }
            while events.count < count && condition.wait(until: deadline) {}
            return events
        }
    }

    var all: [PurgeEvent] { condition.lock(); defer { condition.unlock() }; return events }
}
