import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A really small file system: the real executable runs in a private mount namespace whose storage
/// areas sit on an 8 MiB tmpfs. Needs root (mount); elsewhere the test is visibly disabled.
@Suite(.timeLimit(.minutes(2)))
struct ServiceDiskFullTests {
    static let canMountTmpfs: Bool = {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("tmpfs-probe-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: probe) }
        let p = ChildProcess("/usr/bin/unshare", ["-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$0\"", probe.path])
        guard (try? p.run()) != nil, p.waitUntilExit(timeout: 20) else { return false }
        return p.terminationStatus == 0
    }()

    @Test(.enabled(if: canMountTmpfs, "needs root and mount namespaces (unshare -m, mount -t tmpfs)"))
    func aDownloadBiggerThanTheDiskFailsWithDiskFullAndTheServiceStaysUp() async throws {
        let origin = try TestOrigin(bodySize: 12 << 20, path: "/big.bin")
        defer { origin.stop() }
        origin.addResource(path: "/small.bin", size: 1 << 20)
        origin.addResource(path: "/after.bin", size: 2 << 20)
        // The origin's throttle sends at most 64 KiB per 50 ms (about 1.25 MiB/s): the small file is
        // done long before the big one fills the disk (about 5 s).
        origin.update { $0.bytesPerSecond = 8 << 20 }
        let root = Durability.root("diskfull")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        // The mount exists only in the service's namespace and goes with it.
        let launcher = ["/usr/bin/unshare", "-m", "sh", "-c",
                        "mount -t tmpfs -o size=8m tmpfs '\(root.path)' && exec \"$0\" \"$@\""]
        let service = try await ServiceProcess.start(
            root: root, arguments: Durability.allowLoopback + ["--min-free-disk-bytes", "1M", "--max-concurrent", "4"],
            launcher: launcher)
        let client = service.client

        let big = try #require(try await client.ask(origin.url("/big.bin")).string("id"))
        // Persistent: the small file is never purged, however low the disk gets.
        let small = try await client.post("/downloads", json: #"{"url":"\#(origin.url("/small.bin"))","storage":"persistent"}"#)
        let smallID = try #require(small.string("id"))

        let smallEnd = try await service.waitForEnd(id: smallID)
        #expect(smallEnd["state"] as? String == "completed")
        let bigEnd = try await service.waitForEnd(id: big)
        #expect(bigEnd["state"] as? String == "failed")
        let error = try #require(bigEnd["error"] as? [String: Any])
        #expect(error["code"] as? String == "disk_full", "\(bigEnd)")

        // The service is up, the other download is intact.
        #expect(try await client.request("GET", "/healthz").status == 200)
        #expect(try await client.request("GET", "/downloads/\(smallID)/file").body == origin.expectedBody(path: "/small.bin"))
        // The failed download's partial is purged (low disk), so space returns for the next one.
        let after = try #require(try await client.ask(origin.url("/after.bin")).string("id"))
        let afterEnd = try await service.waitForEnd(id: after)
        #expect(afterEnd["state"] as? String == "completed", "\(afterEnd)")
        #expect(try await client.request("GET", "/downloads/\(after)/file").body == origin.expectedBody(path: "/after.bin"))
        let metrics = try await client.request("GET", "/metrics").bodyText
        #expect(metrics.contains(#"download_service_purged_total{kind="paused_partial",reason="disk"} 1"#))
        #expect(service.logLines.contains { $0.contains(#""event":"purged""#) && $0.contains(#""reason":"disk""#) })
        #expect(try await service.stop() == 0)
    }
}
