import Foundation
import Glibc
import Testing

/// A progress stream survives a change of holder, through real replicas: the stream opened on the
/// replica that ran the download goes on after its last caller left there and another replica
/// resumed it, with strictly increasing ids and its `completed`; a client reconnecting to the other
/// replica with `Last-Event-ID` continues the numbering.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct StreamHandOverReplicasLiveTests {
    @Test func aStreamOnTheFormerHolderFollowsTheResumeElsewhereToCompleted() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20, path: "/handed.bin")
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 1 << 20 }
        let cluster = try await ReplicaSet.start(count: 2)
        let (a, b) = (cluster[0], cluster[1])
        let (id, token) = try await ClusterReplicasLiveTests.post(origin.url, to: a)
        #expect(await cluster.holder(seconds: 5) == 0, "a holds it")
        let (head, stream) = try await a.client.openStream("/downloads/\(id)/progress")
        defer { stream.close() }
        #expect(head.status == 200)
        // The pause comes once a has bytes, which it keeps (synced): b resumes after them. A pause
        // right after the stream's first event could come before any byte (2 of 11 runs alone), and
        // then b rightly starts again from 0 with a second full GET.
        var seen: [EventStream.Event] = []
        while let event = try await stream.next() {
            seen.append(event)
            if event.json["bytesWritten"] as? Int ?? 0 >= 256 << 10 { break }
        }
        #expect(seen.last?.json["bytesWritten"] as? Int ?? 0 >= 256 << 10, "a wrote bytes: \(seen.map(\.data))")
        #expect(try await a.client.request("DELETE", "/downloads/\(token)").string("state") == "paused")
        let released = Date().addingTimeInterval(10)
        while await cluster.holder(among: [0], seconds: 0) != nil && Date() < released { try await Task.sleep(for: .milliseconds(100)) }
        _ = try await ClusterReplicasLiveTests.post(origin.url, to: b)  // b takes the lease and resumes it.

        while let event = try await stream.next() { seen.append(event) }
        let names = seen.compactMap(\.event)
        #expect(names.contains("paused") && names.last == "completed", "\(names)")
        if let paused = names.firstIndex(of: "paused") {
            #expect(names[paused...].contains("resumed"), "resumed after the pause: \(names)")
        }
        let ids = seen.compactMap { $0.id.flatMap { UInt64($0) } }
        #expect(ids.count == seen.count && zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 }, "strictly increasing: \(ids)")
        #expect(seen.last?.json["bytesWritten"] as? Int == 3 << 20)

        // Reconnecting to b after the last id: the numbering goes on there.
        let last = try #require(ids.last)
        let (againHead, again) = try await b.client.openStream("/downloads/\(id)/progress", headers: ["Last-Event-ID": String(last)])
        defer { again.close() }
        #expect(againHead.status == 200)
        let resumed = try await again.next()
        #expect(resumed?.id == String(last + 1) && resumed?.event == "completed", "\(String(describing: resumed))")
        let gets = origin.requests(path: "/handed.bin").filter { $0.method == "GET" }
        let shown = gets.map { "\($0.header("Range") ?? "full") \($0.header("If-Range") ?? "-")" }
        #expect(gets.count == 2 && gets[0].header("Range") == nil
                    && (ClusterReplicasLiveTests.rangeStart(gets[1]) ?? 0) >= 256 << 10 && gets[1].header("If-Range") != nil,
                "one full GET, then the resume with Range after the kept bytes: \(shown)\n\(cluster.stories(of: id))")
        await cluster.stop()
    }
}
