import Foundation
import Testing

/// A completed download is answered by every replica at once: a burst of callers spread over three
/// replicas all get the stored file's `200`, none a `503 held_elsewhere` (nobody needs to hold a
/// finished download for it to be served).
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterCompletedBurstLiveTests {
    @Test func threeHundredCallersOfACompletedDownloadOnThreeReplicasAreAllAnswered() async throws {
        let origin = try TestOrigin(bodySize: 1 << 20, path: ClusterReplicasLiveTests.path)
        defer { origin.stop() }
        let cluster = try await ReplicaSet.start()
        let url = origin.url
        let (id, _) = try await ClusterReplicasLiveTests.post(url, to: cluster[0])
        let end = try await cluster[0].waitForEnd(id: id)
        #expect(end["state"] as? String == "completed", "\(end)")
        let replicas = cluster.replicas
        let statuses = try await withThrowingTaskGroup(of: String.self) { group in
            var all: [String] = []
            for caller in 0..<300 {
                group.addTask {
                    let answer = try await replicas[caller % 3].client.ask(url)
                    return answer.status == 200 ? "200" : "\(answer.status) \(answer.text)"
                }
                if caller >= 30, let status = try await group.next() { all.append(status) }  // At most ~30 at once.
            }
            for try await status in group { all.append(status) }
            return all
        }
        let refused = statuses.filter { $0 != "200" }
        #expect(refused.isEmpty, "\(refused.count) of 300 not answered 200, e.g. \(refused.prefix(3))")
        #expect(origin.requests(path: ClusterReplicasLiveTests.path).filter { $0.method == "GET" }.count == 1)
        await cluster.stop()
    }
}
