import Foundation
import Testing

/// A `/fetch` client that goes away while its answer waits for the origin's head: an interrupted
/// client closes its socket (a FIN, no reset), and its interest ends within about a second (the
/// test allows four, for a loaded machine: the origin's head alone takes over fifteen).
@Suite(.timeLimit(.minutes(2)))
struct FetchLeavingLiveTests {
    @Test func aClientClosingWhileTheOriginsHeadIsSlowLeavesLongBeforeTheHead() async throws {
        let origin = try TestOrigin(bodySize: 64 << 10)
        defer { origin.stop() }
        origin.update { $0.headByteDelay = 0.1 }  // a head of ~150 bytes: over fifteen seconds
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback)
        let api = HTTPTestClient(port: service.port)
        let client = try await FetchLiveTests.open(service, origin.url)
        func only() async throws -> [String: Any]? {
            let list = try await api.request("GET", "/downloads")
            return (list.json["downloads"] as? [[String: Any]])?.first
        }
        var joined = false
        for _ in 0..<100 where !joined {
            joined = try await only()?["callers"] as? Int == 1
            if !joined { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(joined, "the reader counts as a caller")
        client.close()
        let left = Date()
        let deadline = left.addingTimeInterval(4)
        var download: [String: Any]?
        repeat {
            download = try await only()
            if download?["callers"] as? Int == 0 && download?["state"] as? String == "paused" { break }
            try await Task.sleep(for: .milliseconds(20))
        } while Date() < deadline
        #expect(download?["callers"] as? Int == 0 && download?["state"] as? String == "paused", "\(String(describing: download))")
        #expect(Date().timeIntervalSince(left) < 4, "noticed within about a second, not when the head came")
    }
}
