import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// SIGKILL at random moments during several concurrent downloads, restart on the same directories,
/// repeat; no download is ever listed `completed` with wrong bytes, all end byte-identical, and the
/// bytes fetched twice stay within what was not yet durable at each kill.
@Suite(.timeLimit(.minutes(3)))
struct ServiceChaosTests {
    static let checkpointBytes: Int64 = 4 << 20
    static let bytesPerSecond = 4 << 20

    /// Every download listed `completed` has the origin's SHA-256, in the listing and on disk.
    func checkCompleted(_ service: ServiceProcess, _ expected: [String: String], _ when: String) async throws -> Int {
        var completed = 0
        for download in try await Durability.list(service) where download["state"] as? String == "completed" {
            let url = download["url"] as? String ?? ""
            let sha = try #require(expected[url], "unknown url \(url)")
            #expect(download["sha256"] as? String == sha, "\(when): \(url) listed with a wrong SHA-256")
            let path = try #require(download["path"] as? String)
            #expect(Durability.sha256(file: path) == sha, "\(when): \(url) completed with wrong bytes on disk")
            completed += 1
        }
        return completed
    }

    @Test func sigkillAtRandomMomentsThenEveryDownloadCompletesByteIdentical() async throws {
        let sizes = [8 << 20, 12 << 20, 16 << 20, 24 << 20]
        let origin = try TestOrigin(bodySize: sizes[0], path: "/k0.bin")
        defer { origin.stop() }
        for (i, size) in sizes.enumerated().dropFirst() { origin.addResource(path: "/k\(i).bin", size: size) }
        // Throttled (the origin's pacing caps a connection near 1.25 MiB/s), so kills land mid-transfer.
        origin.update { $0.bytesPerSecond = Self.bytesPerSecond }
        let paths = sizes.indices.map { "/k\($0).bin" }
        var expected: [String: String] = [:]
        for path in paths { expected[origin.url(path)] = Durability.sha256(origin.expectedBody(path: path)) }
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SplitMix64(seed: seed)  // reproducible random moments (the seed is printed)
        print("chaos: seed \(seed)")

        let root = Durability.root("chaos")
        var service = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
        var ids: [String] = []
        for path in paths {
            ids.append(try #require(try await service.client.ask(origin.url(path)).string("id")))
        }
        let kills = 6
        var killed = 0
        var runningAtKills = 0
        for round in 0..<kills {
            // A random moment: a random running download has written a random number of further
            // bytes (0.25–5 MiB, so some kills land right after a restart, before any checkpoint).
            let listing = try await Durability.list(service)
            let running = listing.filter { $0["state"] as? String != "completed" }.compactMap { $0["id"] as? String }
            guard let victim = running.randomElement(using: &random) else { break }
            let from = listing.first { $0["id"] as? String == victim }?["bytesWritten"] as? Int ?? 0
            let more = Int.random(in: (256 << 10)...(5 << 20), using: &random)
            let (head, stream) = try await service.client.openStream("/downloads/\(victim)/progress")
            #expect(head.status == 200)
            _ = try await withTimeout(30) {
                try await stream.next { event in
                    event.event == "completed" || event.event == "failed"
                        || (event.json["bytesWritten"] as? Int ?? 0) >= from + more
                }
            }
            stream.close()
            runningAtKills += try await Durability.list(service).filter { $0["state"] as? String != "completed" }.count
            #expect(try await service.stop(signal: SIGKILL) == SIGKILL)
            killed += 1
            service = try await ServiceProcess.start(root: root, arguments: Durability.allowLoopback)
            let done = try await checkCompleted(service, expected, "after kill \(round + 1)")
            print("chaos: kill \(round + 1) at +\(more >> 10) KiB of \(victim); \(done) completed after the restart")
        }

        origin.update { $0.bytesPerSecond = nil }
        for id in ids {
            let end = try await service.waitForEnd(id: id)
            #expect(end["state"] as? String == "completed", "\(id): \(end)")
        }
        #expect(try await checkCompleted(service, expected, "at the end") == sizes.count)
        for (path, id) in zip(paths, ids) {
            let file = try await service.client.request("GET", "/downloads/\(id)/file")
            #expect(Durability.sha256(file.body) == expected[origin.url(path)], "\(path) not byte-identical")
        }
        #expect(try await service.stop() == 0)

        let total = Int64(sizes.reduce(0, +))
        let refetched = origin.bodyBytesSent - total
        // At a kill a running download may lose what was not yet checkpointed (at most 4 MiB, or
        // 1 s of transfer) plus what was in flight (the 1 MiB write buffer, socket buffers, a
        // checkpoint still syncing): 6 MiB per download running at the kill.
        let bound = Int64(runningAtKills) * (Self.checkpointBytes + (2 << 20))
        print("chaos: \(killed) kills, origin sent \(origin.bodyBytesSent) bytes for \(total); refetched \(refetched) bytes "
              + "(\(refetched >> 10) KiB; bound \(bound >> 10) KiB over \(runningAtKills) running downloads at the kills)")
        #expect(refetched >= 0)
        #expect(refetched <= bound)
    }
}
