import Foundation
import Testing
@testable import DownloadService

/// One service per state directory: a second process on the same directory is refused at start
/// (it would overwrite the first one's records and sweep their files); the lock goes with the
/// process that held it, however it ended.
@Suite(.timeLimit(.minutes(2)))
struct StateDirectoryLockLiveTests {
    @Test func aSecondServiceOnTheSameStateDirectoryIsRefusedUntilTheFirstIsGone() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let first = try await ServiceProcess.start(root: root)
        do {
            let second = try await ServiceProcess.start(root: root)
            _ = try await second.stop()
            Issue.record("a second service started on the same state directory")
        } catch let failure as ServiceProcess.Failure {
            #expect(failure.description.contains("another download-service runs on the state directory"), "\(failure)")
        }
        #expect(try await first.client.request("GET", "/healthz").status == 200, "the first one is untouched")
        #expect(try await first.stop(signal: SIGKILL) != nil)
        let third = try await ServiceProcess.start(root: root)
        #expect(try await third.client.request("GET", "/healthz").status == 200)
        #expect(try await third.stop() == 0)
    }

    /// A second service with a state directory of its own but the first one's cache (or data)
    /// directory is refused too: at its start it would sweep the first one's files (none of its
    /// rows names them). Areas the same service gives twice are locked once.
    @Test(arguments: ["--cache-dir", "--data-dir"])
    func aSecondServiceSharingACacheOrDataDirectoryIsRefused(option: String) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-lock-\(UUID().uuidString)")
        let other = FileManager.default.temporaryDirectory.appendingPathComponent("ds-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root); try? FileManager.default.removeItem(at: other) }
        let first = try await ServiceProcess.start(root: root)
        let shared = root.appendingPathComponent(option == "--cache-dir" ? "cache" : "data").path
        let areas = ["--state-dir", other.appendingPathComponent("state").path, "--cache-dir", other.appendingPathComponent("cache").path,
                     "--data-dir", other.appendingPathComponent("data").path]
        var arguments: [String] = []
        for index in stride(from: 0, to: areas.count, by: 2) {
            arguments += [areas[index], areas[index] == option ? shared : areas[index + 1]]
        }
        do {
            let second = try await ServiceProcess.start(root: other, arguments: arguments)
            _ = try await second.stop()
            Issue.record("a second service started on the first one's \(option)")
        } catch let failure as ServiceProcess.Failure {
            #expect(failure.description.contains("another download-service runs on the directory of \(option)"), "\(failure)")
        }
        #expect(try await first.stop() == 0)
        // One service whose cache and data directories are one: locked once, it starts.
        let one = other.appendingPathComponent("one").path
        let single = try await ServiceProcess.start(root: other, arguments: ["--state-dir", other.appendingPathComponent("s").path,
                                                                             "--cache-dir", one, "--data-dir", one])
        #expect(try await single.stop() == 0)
    }

    /// A cache or data directory whose filesystem takes no locks (NFSv3 without lockd: ENOLCK) is
    /// left unlocked and named, never a reason not to start; another process's lock still refuses.
    @Test func anAreaWithoutLocksIsNamedNotRefused() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let cache = root.appendingPathComponent("cache"), data = root.appendingPathComponent("data")
        let noLocks: (Int32, Int32) -> Int32 = { _, _ in errno = ENOLCK; return -1 }
        let (locks, unlockable) = try StateDirectoryLock.acquireAreas([("--cache-dir", cache), ("--data-dir", data)], flockCall: noLocks)
        #expect(locks.isEmpty && unlockable == [cache.path, data.path])
        let (held, none) = try StateDirectoryLock.acquireAreas([("--cache-dir", cache), ("--data-dir", cache)])
        #expect(held.count == 1 && none.isEmpty, "one directory given twice is locked once")
        let busy: (Int32, Int32) -> Int32 = { _, _ in errno = EWOULDBLOCK; return -1 }
        #expect(throws: ServiceStartError.self) { try StateDirectoryLock.acquireAreas([("--data-dir", data)], flockCall: busy) }
        withExtendedLifetime(held) {}
    }
}
