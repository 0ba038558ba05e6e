import Foundation
import Glibc
import Testing

/// `GET /events` and a completion webhook through three replicas of the real executable: a stream
/// opened on one replica shows the download another holds from `created` to `completed`, with
/// progress and strictly increasing ids, and the callback taken by the holder is delivered once.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterFeedReplicasLiveTests {
    @Test func anEventStreamOnOneReplicaFollowsADownloadAnotherHoldsAndItsWebhookComesOnce() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20, path: "/feed.bin")
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let cluster = try await ReplicaSet.start()
        let (head, stream) = try await cluster[1].client.openStream("/events")
        #expect(head.status == 200)
        let body = #"{"url":"\#(origin.url)","callback":{"url":"\#(receiver.url("/done"))"}}"#
        let answer = try await cluster[0].client.post("/downloads", json: body)
        #expect(answer.status == 202, "\(answer.status) \(answer.text)")
        let id = try #require(answer.string("id"))
        var names: [String] = []
        var ids: [UInt64] = []
        _ = try await stream.next { event in
            if let value = event.id.flatMap(UInt64.init) { ids.append(value) }
            guard event.json["id"] as? String == id, let name = event.event else { return false }
            names.append(name)
            return name == "completed"
        }
        stream.close()
        #expect(names.first == "created" && names.last == "completed", "\(names)")
        #expect(names.filter { $0 == "progress" }.count >= 1, "\(names)")
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 }, "ids increase strictly: \(ids)")
        _ = try await receiver.waitFor(1)
        try await Task.sleep(for: .seconds(2))  // Rounds of all three replicas: a second POST would come.
        #expect(receiver.received.count == 1, "one delivery: \(receiver.received.count)")
        #expect(receiver.received.first?.json?["event"] as? String == "completed")
        await cluster.stop()
    }
}
