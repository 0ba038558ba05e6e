import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// The narrow windows, hit deterministically: the real executable SIGKILLs itself at a test crash
/// point (`DOWNLOAD_SERVICE_TEST_CRASH_POINT`), then restarts on the same directories.
@Suite(.timeLimit(.minutes(2)))
struct ServiceCrashPointTests {
    /// A crash on either side of the rename that publishes a verified file: after the restart the
    /// download is completed from the stored intent, with the right bytes and no new request.
    @Test(arguments: ["before-publish-rename", "after-publish-rename"])
    func crashAroundThePublishingRename(point: String) async throws {
        let origin = try TestOrigin(bodySize: 3 << 20, path: "/pub.bin")
        defer { origin.stop() }
        let root = Durability.root("publish")
        let first = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback,
                                                   environment: ["DOWNLOAD_SERVICE_TEST_CRASH_POINT": point])
        let created = try await first.client.ask(origin.url)
        let id = try #require(created.string("id"))
        #expect(try await first.waitForExit() == SIGKILL, "the crash point was not reached")
        let partial = root.appendingPathComponent("state/partials/\(id).part").path
        let target = root.appendingPathComponent("cache/\(id)-pub.bin").path
        if point == "before-publish-rename" {
            #expect(FileStore.fileSize(partial) == 3 << 20 && FileStore.fileSize(target) == nil)
        } else {
            #expect(FileStore.fileSize(partial) == nil && FileStore.fileSize(target) == 3 << 20)
        }
        let gets = origin.getCount()

        let second = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        let listed = try await second.client.request("GET", "/downloads/\(id)")
        #expect(listed.string("state") == "completed")
        #expect(listed.string("sha256") == Durability.sha256(origin.expectedBody()))
        #expect(Durability.sha256(file: target) == Durability.sha256(origin.expectedBody()))
        #expect(try await second.client.request("GET", "/downloads/\(id)/file").body == origin.expectedBody())
        #expect(origin.getCount() == gets, "a published file was fetched again")
        #expect(FileStore.fileSize(partial) == nil)
        #expect(try await second.stop() == 0)
    }

    /// A crash half-way through a state commit (inside its transaction, before COMMIT): the restart
    /// finds the database whole (not set aside) with every download, and each completes byte-identical.
    @Test func crashInTheMiddleOfAStateCommit() async throws {
        let origin = try TestOrigin(bodySize: 4 << 20, path: "/j0.bin")
        defer { origin.stop() }
        for i in 1..<3 { origin.addResource(path: "/j\(i).bin", size: (4 + i) << 20) }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        let root = Durability.root("commit")
        // A first run stores the three downloads and stops (SIGTERM) mid-transfer.
        let first = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        var ids: [String: String] = [:]
        for i in 0..<3 {
            let created = try await first.client.ask(origin.url("/j\(i).bin"))
            let id = try #require(created.string("id"))
            ids["/j\(i).bin"] = id
        }
        let (_, stream) = try await first.client.openStream("/downloads/\(ids["/j0.bin"]!)/progress")
        _ = try await stream.next { ($0.json["bytesWritten"] as? Int ?? 0) > 0 }
        stream.close()
        #expect(try await first.stop() == 0)
        // The second run carries them on and dies in its third commit (heads accepted, then
        // checkpoints every second per transfer).
        let second = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback,
                                                    environment: ["DOWNLOAD_SERVICE_TEST_CRASH_POINT": "mid-state-commit:3"])
        #expect(try await second.waitForExit(timeout: 30) == SIGKILL, "the crash point was not reached")
        let state = root.appendingPathComponent("state").path
        let opened = try SQLiteStateStore.open(directory: state)
        #expect(opened.damagedKeptAt == nil)
        #expect(Set(try opened.store.load().map(\.id)) == Set(ids.values))

        origin.update { $0.bytesPerSecond = nil }
        let third = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        for (path, id) in ids.sorted(by: { $0.key < $1.key }) {
            let done = try await third.waitForEnd(id: id)
            #expect(done["state"] as? String == "completed", "\(path): \(done)")
            #expect(done["sha256"] as? String == Durability.sha256(origin.expectedBody(path: path)))
        }
        #expect(try await third.stop() == 0)
    }
}
