import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Three replicas of the real executable on one real PostgreSQL and one shared directory act as one
/// service: one upstream transfer per URL whichever replica callers reach, any replica answers for
/// any download, a dead owner's transfer is taken over with `Range` from the durable offset, a
/// paused owner is fenced, a database restart loses nothing.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)),
       .serialized)
struct ClusterReplicasLiveTests {
    static let path = "/replicated.bin"

    /// The first byte a `Range: bytes=N-` asks for, nil for none.
    static func rangeStart(_ request: RecordedRequest) -> Int? {
        request.header("Range").flatMap { Int($0.dropFirst(6).prefix { $0 != "-" }) }
    }

    /// POSTs the origin's URL to `replica`; the answer's id and token.
    static func post(_ url: String, to replica: ServiceProcess) async throws -> (id: String, token: String) {
        let answer = try await replica.client.ask(url)
        #expect(answer.status == 202 || answer.status == 200, "\(answer.status) \(answer.text)")
        return (try #require(answer.string("id")), try #require(answer.string("token")))
    }

    @Test func threeHundredCallersOnThreeReplicasShareOneUpstreamGET() async throws {
        let origin = try TestOrigin(bodySize: 4 << 20, path: Self.path)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 2 << 20 }  // ~2 s: every caller arrives while it runs.
        let cluster = try await ReplicaSet.start()
        let url = origin.url
        let replicas = cluster.replicas
        let answers = try await withThrowingTaskGroup(of: (Int, String, String).self) { group in
            var all: [(Int, String, String)] = []
            for caller in 0..<300 {
                group.addTask {
                    let (id, token) = try await Self.post(url, to: replicas[caller % 3])
                    return (caller % 3, id, token)
                }
                if caller >= 30, let answer = try await group.next() { all.append(answer) }  // At most ~30 POSTs in flight.
            }
            for try await answer in group { all.append(answer) }
            return all
        }
        let ids = Set(answers.map(\.1))
        #expect(ids.count == 1, "one download for one URL across replicas: \(ids)")
        let id = try #require(ids.first)
        #expect(Set(answers.map(\.2)).count == answers.count, "every caller its own token")

        // Progress through every replica ends with `completed`.
        for replica in replicas {
            let end = try await replica.waitForEnd(id: id)
            #expect(end["state"] as? String == "completed", "\(end)")
        }
        let gets = origin.requests(path: Self.path).filter { $0.method == "GET" }
        #expect(gets.count == 1, "exactly one upstream GET: \(gets.map { $0.header("Range") ?? "full" })")
        for replica in replicas {
            let snapshot = try await replica.client.request("GET", "/downloads/\(id)")
            #expect(snapshot.status == 200 && snapshot.string("state") == "completed")
            let match = BodyMatch(try await replica.client.request("GET", "/downloads/\(id)/file").body, origin.expectedBody())
            #expect(match.same, "\(match)")
        }
        // A token given by one replica is withdrawn through another.
        let (madeOn, _, token) = answers[0]
        let cancelled = try await replicas[(madeOn + 1) % 3].client.request("DELETE", "/downloads/\(token)")
        #expect(cancelled.status == 200, "\(cancelled.text)")
        await cluster.stop()
    }

    @Test func aKilledOwnersTransferIsTakenOverWithRange() async throws {
        let origin = try TestOrigin(bodySize: 12 << 20, path: Self.path)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        let cluster = try await ReplicaSet.start(arguments: ["--checkpoint-interval", "0.5"])
        let (id, token) = try await Self.post(origin.url, to: cluster[0])
        let owner = try #require(await cluster.holder(), "a replica holds the transfer")
        let moving = try await cluster.poll(cluster[owner], id: id) { ($0["bytesWritten"] as? Int ?? 0) > 3 << 20 }
        #expect(moving["state"] as? String == "downloading", "\(moving)")
        // A checkpoint records a durable offset in the lease: what a takeover resumes from.
        let database = cluster.databaseURL
        let durable = try await eventuallyValue(within: 10) { () async throws -> Int64? in
            let offset = try await onThread {
                try PostgresConnection(url: database, timeout: 5).execute(
                    "SELECT durable_offset FROM leases WHERE key = (SELECT lease_key FROM downloads WHERE id = $1) AND active", [id]
                ).scalar.flatMap { Int64($0) } ?? 0
            }
            return offset > 0 ? offset : nil
        }
        #expect(durable != nil, "no durable offset recorded in the lease before the kill")
        _ = try await cluster[owner].stop(signal: SIGKILL)
        let killedAt = Date()
        origin.update { $0.bytesPerSecond = 4 << 20 }

        let others = cluster.replicas.indices.filter { $0 != owner }
        let end = try await cluster.poll(cluster[others[0]], id: id, seconds: 40) { $0["state"] as? String == "completed" }
        #expect(end["state"] as? String == "completed", "\(end)")
        let gets = origin.requests(path: Self.path).filter { $0.method == "GET" }
        #expect(gets.first.map { Self.rangeStart($0) == nil } == true, "the first GET is the whole file")
        let later = gets.dropFirst()
        #expect(!later.isEmpty && later.allSatisfy { (Self.rangeStart($0) ?? 0) > 0 && $0.header("If-Range") != nil },
                "after the owner's death: ranged GETs from the durable offset only: \(later.map { $0.header("Range") ?? "full" })")
        var takeover = 0.0
        for index in others { takeover += await cluster.metric("download_service_cluster_takeovers_total", on: cluster[index]) ?? 0 }
        #expect(takeover >= 1)
        print("takeover: completed \(Date().timeIntervalSince(killedAt)) s after the owner's SIGKILL")
        for index in others {
            let file = try await cluster[index].client.request("GET", "/downloads/\(id)/file")
            #expect(file.status == 200 && BodyMatch(file.body, origin.expectedBody()).same,
                    "replica \(index): \(file.status), \(file.body.count) bytes \(file.status == 200 ? "" : file.text)")
        }
        let cancelled = try await cluster[others[1]].client.request("DELETE", "/downloads/\(token)")
        #expect(cancelled.status == 200, "the caller's token survived the owner: \(cancelled.text)")
        await cluster.stop()
    }

    @Test func aStoppedOwnerIsFencedWhenItContinues() async throws {
        let origin = try TestOrigin(bodySize: 8 << 20, path: Self.path)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        let cluster = try await ReplicaSet.start(arguments: ["--checkpoint-interval", "0.5"])
        let (id, _) = try await Self.post(origin.url, to: cluster[1])
        let owner = try #require(await cluster.holder())
        _ = try await cluster.poll(cluster[owner], id: id) { ($0["bytesWritten"] as? Int ?? 0) > 1 << 20 }
        cluster[owner].process.signal(SIGSTOP)
        // Another replica takes the lapsed lease and resumes with Range.
        let deadline = Date().addingTimeInterval(Double(cluster.ttl) * 2 + 8)
        while origin.requests(path: Self.path).filter({ Self.rangeStart($0) != nil }).isEmpty && Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(origin.requests(path: Self.path).contains { Self.rangeStart($0) != nil }, "nobody took the lapsed lease over")
        cluster[owner].process.signal(SIGCONT)
        var fenced = 0.0
        let fenceDeadline = Date().addingTimeInterval(10)
        while fenced < 1 && Date() < fenceDeadline {
            fenced = await cluster.metric("download_service_cluster_fenced_writes_total", on: cluster[owner]) ?? 0
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(fenced >= 1, "the continued owner found its lease gone")
        origin.update { $0.bytesPerSecond = nil }
        let other = cluster.replicas.indices.first { $0 != owner }!
        let end = try await cluster.poll(cluster[other], id: id, seconds: 40) { $0["state"] as? String == "completed" }
        #expect(end["state"] as? String == "completed", "\(end)")
        let served = try await cluster[owner].client.request("GET", "/downloads/\(id)/file")
        let shown = "\(served.status), \(served.body.count) bytes \(served.status == 200 ? "" : served.text)"
        let match = BodyMatch(served.body, origin.expectedBody())
        #expect(match.same, "never spliced, and the fenced replica still serves: \(match); \(shown)")
        #expect(try await cluster[owner].client.request("GET", "/healthz").status == 200, "the process carries on")
        await cluster.stop()
    }

    @Test func theLastCallerCancellingOnAnotherReplicaPausesTheTransfer() async throws {
        let origin = try TestOrigin(bodySize: 8 << 20, path: Self.path)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 512 << 10 }
        let cluster = try await ReplicaSet.start()
        let (id, token) = try await Self.post(origin.url, to: cluster[0])
        let owner = try #require(await cluster.holder())
        _ = try await cluster.poll(cluster[owner], id: id) { ($0["bytesWritten"] as? Int ?? 0) > 0 }
        let elsewhere = (owner + 1) % 3
        let cancelled = try await cluster[elsewhere].client.request("DELETE", "/downloads/\(token)")
        #expect(cancelled.status == 200 && cancelled.string("state") == "paused", "\(cancelled.text)")
        let paused = try await cluster.poll(cluster[owner], id: id, seconds: 1.5) { $0["state"] as? String == "paused" }
        #expect(paused["state"] as? String == "paused", "the owner's transfer stopped within a second: \(paused)")
        let bytes = paused["bytesWritten"] as? Int ?? 0
        try await Task.sleep(for: .milliseconds(1500))
        let still = try await cluster.poll(cluster[(owner + 2) % 3], id: id) { _ in true }
        #expect(still["state"] as? String == "paused" && (still["bytesWritten"] as? Int ?? 0) <= bytes + (1 << 20), "\(still)")
        await cluster.stop()
    }

    @Test func aDatabaseRestartMidTransferLosesNothing() async throws {
        let origin = try TestOrigin(bodySize: 8 << 20, path: Self.path)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        let cluster = try await ReplicaSet.start(arguments: ["--checkpoint-interval", "0.5"])
        let (id, token) = try await Self.post(origin.url, to: cluster[2])
        let owner = try #require(await cluster.holder())
        _ = try await cluster.poll(cluster[owner], id: id) { ($0["bytesWritten"] as? Int ?? 0) > 2 << 20 }
        try await Task.sleep(for: .milliseconds(1000))
        let postgres = cluster.postgres
        try await onThread { postgres.stop(removing: false) }
        try await Task.sleep(for: .milliseconds(1500))
        try await onThread { try postgres.start() }
        origin.update { $0.bytesPerSecond = nil }
        // A caller asking again (any replica) gets the same download, which goes on from its bytes.
        let again = try await cluster.poll(cluster[(owner + 1) % 3], id: id, seconds: 30) { $0["state"] != nil }
        #expect(again["id"] as? String == id, "the download survived the database restart")
        let end = try await cluster.poll(cluster[(owner + 1) % 3], id: id, seconds: 40) { $0["state"] as? String == "completed" }
        #expect(end["state"] as? String == "completed", "\(end)")
        let gets = origin.requests(path: Self.path).filter { $0.method == "GET" }
        #expect(gets.dropFirst().allSatisfy { (Self.rangeStart($0) ?? 0) > 0 }, "never again from 0: \(gets.map { $0.header("Range") ?? "full" })")
        let match = BodyMatch(try await cluster[owner].client.request("GET", "/downloads/\(id)/file").body, origin.expectedBody())
        #expect(match.same, "\(match)")
        #expect(try await cluster[(owner + 2) % 3].client.request("DELETE", "/downloads/\(token)").status == 200, "the token was kept")
        await cluster.stop()
    }
}
