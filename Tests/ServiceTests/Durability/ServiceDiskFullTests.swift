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

    /// Runs the service on an 8 MiB tmpfs mounted at `root` in a mount namespace of its own (the
    /// mount goes with it), after `first` (a shell command run on the mounted file system).
    static func launcher(_ root: URL, first: String? = nil) -> [String] {
        let mount = "mount -t tmpfs -o size=8m tmpfs '\(root.path)'" + (first.map { " && " + $0 } ?? "")
        return ["/usr/bin/unshare", "-m", "sh", "-c", mount + " && exec \"$0\" \"$@\""]
    }

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
        let service = try await ServiceProcess.start(
            root: root, arguments: Durability.allowLoopback + ["--min-free-disk-bytes", "1M", "--max-concurrent", "4",
                                                               "--disk-full-wait", "5"],
            launcher: Self.launcher(root))
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
        #expect((error["message"] as? String)?.contains("waited") == true, "it waited for space first: \(error)")

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

    /// A download that runs out of space keeps its bytes and waits (`--disk-full-wait`): watchers
    /// see `reason: disk_full`, the origin is not asked while the disk stays full, and once a file
    /// outside the service is deleted the download goes on from its kept bytes, byte-identical.
    @Test(.enabled(if: canMountTmpfs, "needs root and mount namespaces (unshare -m, mount -t tmpfs)"))
    func aDownloadThatRunsOutOfSpaceWaitsAndGoesOnOnceSpaceIsFreed() async throws {
        let origin = try TestOrigin(bodySize: 6 << 20, path: "/big.bin")
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 8 << 20 }
        let root = Durability.root("diskwait")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        // Half of the 8 MiB file system is taken by a file the service knows nothing of.
        let filler = root.appendingPathComponent("filler").path
        let service = try await ServiceProcess.start(
            root: root, arguments: Durability.allowLoopback + ["--min-free-disk-bytes", "1M", "--disk-full-wait", "120",
                                                               "--stall-timeout", "4"],
            launcher: Self.launcher(root, first: "head -c 4194304 /dev/zero > '\(filler)'"))
        let id = try #require(try await service.client.ask(origin.url("/big.bin")).string("id"))

        let waiting = try await service.waitForEvent(id: id, "the wait for space") { $0.json["reason"] as? String == "disk_full" }
        #expect(waiting["state"] as? String == "downloading", "\(waiting)")
        // (A loaded machine may have stalled the transfer before: more than one request is fine.)
        let askedBefore = origin.requests(path: "/big.bin").count
        // A /fetch joining now waits for the origin's answer while the download waits for space:
        // for the stall timeout, then 503 disk_full (the download waits on for its caller).
        let fetchedAt = Date()
        let fetch = try await service.client.request("GET", "/fetch?url=\(origin.url("/big.bin"))")
        #expect(fetch.status == 503 && fetch.json["error"].flatMap { ($0 as? [String: Any])?["code"] as? String } == "disk_full",
                "\(fetch.status) \(fetch.text)")
        #expect(fetch.header("Retry-After") != nil && fetch.header("X-Download-Id") == id && Date().timeIntervalSince(fetchedAt) >= 4)
        // At least one look at the free space (every 5 s) since the wait began, the disk still full.
        try await Task.sleep(for: .seconds(max(0, 6 - Date().timeIntervalSince(fetchedAt))))
        let snapshot = try await service.client.request("GET", "/downloads/\(id)").json
        #expect(snapshot["state"] as? String == "downloading" && snapshot["reason"] as? String == "disk_full", "\(snapshot)")
        #expect(origin.requests(path: "/big.bin").count == askedBefore, "the origin is not asked while the disk is full")
        let metrics = try await service.client.request("GET", "/metrics").bodyText
        #expect(metrics.contains("download_service_downloads_waiting_for_space 1\n"))

        // Freed outside the service (seen through its mount namespace).
        try FileManager.default.removeItem(atPath: "/proc/\(service.process.processIdentifier)/root\(filler)")
        let end = try await service.waitForEnd(id: id)
        #expect(end["state"] as? String == "completed" && end["reason"] == nil, "\(end)")
        #expect(try await service.client.request("GET", "/downloads/\(id)/file").body == origin.expectedBody(path: "/big.bin"))
        let asked = origin.requests(path: "/big.bin")
        #expect(asked.count >= askedBefore + 1, "a resume: \(asked.map { $0.header("Range") ?? "-" })")
        let offset = asked.last?.header("Range").flatMap { Int64($0.dropFirst("bytes=".count).dropLast()) } ?? 0
        #expect(offset > 0 && asked.last?.header("If-Range") != nil, "resumed from the kept bytes")
        #expect(service.logLines.contains { $0.contains(#""event":"retry_scheduled""#) && $0.contains(id) && $0.contains("No space left") },
                "\(service.logLines(containing: id))")
        #expect(try await service.stop() == 0)
    }
}
