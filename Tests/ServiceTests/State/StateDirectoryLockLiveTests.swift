import Foundation
import Testing

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
}
