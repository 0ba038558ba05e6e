import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Segmented fetch through the real executable: a SIGKILL mid-download, then a restart on the same
/// directories, resumes every segment where its stored durable offset stood.
@Suite(.timeLimit(.minutes(2)))
struct ServiceSegmentKillTests {
    /// Two segments of 8 MiB (the smallest the service makes) and a little more.
    static let size = (16 << 20) + 4096
    static let arguments = Durability.allowLoopback + ["--max-connections-per-download", "2"]

    /// The first byte of `bytes=N-…`.
    static func first(_ range: String) -> Int {
        Int(range.dropFirst(6).prefix { $0 != "-" }) ?? -1
    }

    @Test func everySegmentResumesWhereItStoodAfterSIGKILLByteIdentical() async throws {
        let origin = try TestOrigin(bodySize: Self.size, path: "/seg.bin")
        defer { origin.stop() }
        // Both requests are held 6 MiB into their 8 MiB, so a test resumed late on a loaded machine
        // still kills a running download (throttled alone, one found it completed).
        origin.update { $0.bytesPerSecond = 512 << 10; $0.stallBound = 25 }
        origin.inject(.stall(afterBodyBytes: 6 << 20), times: 2)
        let root = Durability.root("segments-kill")
        let first = try await ServiceProcess.start(root: root, arguments: Self.arguments)
        let created = try await first.client.post("/downloads", json: #"{"url":"\#(origin.url)","connections":2}"#)
        let id = try #require(created.string("id"))
        let (_, stream) = try await first.client.openStream("/downloads/\(id)/progress")
        let moving = try #require(await stream.next { ($0.json["bytesWritten"] as? Int ?? 0) > 3 << 20 })
        stream.close()
        let connections = moving.json["connections"] as? [String: Any]
        #expect(connections?["granted"] as? Int == 2)
        #expect(connections?["active"] as? Int == 2)
        // Checkpoints (every second) of both connections, stored: what the restart resumes from.
        let state = root.appendingPathComponent("state").path
        let checkpointed = await eventually(within: 15) {
            guard let row = try? StateFixture.read(state).first(where: { $0.id == id }), let segments = row.segments,
                  segments.count == 2 else { return false }
            return row.verifiedOffset > 0 && segments[1].next > Int64(Self.size / 2)
        }
        #expect(checkpointed, "no durable offset of both connections stored before the kill")
        let standing = try await first.client.request("GET", "/downloads/\(id)")
        #expect(standing.string("state") == "downloading", "finished before the kill: the test proves nothing")
        _ = try await first.stop(signal: SIGKILL)
        let before = origin.requests(path: "/seg.bin").count
        #expect(before == 2)

        origin.update { $0.bytesPerSecond = nil }
        origin.clearFaults()
        let second = try await ServiceProcess.start(root: root, arguments: Self.arguments)
        let done = try await second.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed", "\(done)")
        #expect(done["sha256"] as? String == Durability.sha256(origin.expectedBody()))
        #expect(try await second.client.request("GET", "/downloads/\(id)/file").body == origin.expectedBody())
        let after = Array(origin.requests(path: "/seg.bin").dropFirst(before))
        let ranges = after.compactMap { $0.header("Range") }
        let half = Self.size / 2
        #expect(ranges.count == after.count, "a request after the restart asked for the whole file")
        #expect(after.allSatisfy { $0.header("If-Range") != nil })
        // The prefix goes on from its durable offset, the second segment from its own.
        #expect(ranges.contains { Self.first($0) > 0 && Self.first($0) < half && $0.hasSuffix("-") }, "\(ranges)")
        #expect(ranges.contains { Self.first($0) > half && $0.hasSuffix("-\(Self.size - 1)") }, "\(ranges)")
        #expect(try await second.stop() == 0)
    }
}
