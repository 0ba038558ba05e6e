import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A completion webhook survives the SIGKILL of the replica that was sending it (real processes on
/// one real PostgreSQL): the killed replica's claim lapses and another replica sends the same
/// delivery again (at least once: the same `deliveryId` and body), once.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterWebhookSenderLiveTests {
    /// A claim lasts the try's bound (10 s) plus a margin (5 s) from the moment it is taken.
    static let claimSeconds = 15.0

    @Test func aDeliveryWhoseSenderIsKilledMidTryIsSentAgainByAnotherReplica() async throws {
        let origin = try TestOrigin(bodySize: 256 << 10, path: "/hooked.bin")
        defer { origin.stop() }
        // The first try is never answered: its sender is killed while it waits.
        let receiver = try WebhookReceiver(answers: [.init(status: 200, held: true)])
        defer { receiver.stop() }
        let cluster = try await ReplicaSet.start(count: 1)
        let body = #"{"url":"\#(origin.url)","callback":{"url":"\#(receiver.url("/done"))"}}"#
        // Before the POST: the delivery, so its claim, cannot exist earlier.
        let asked = Date()
        let answer = try await cluster[0].client.post("/downloads", json: body)
        #expect(answer.status == 202 || answer.status == 200, "\(answer.status) \(answer.text)")
        let id = try #require(answer.string("id"))
        let first = try await receiver.waitFor(1, timeout: 30)
        // The claim was taken before this try went out: it lapses at most `claimSeconds` after it.
        let firstSeen = try #require(first.first).at
        let sent = first.first?.json
        #expect((sent?["download"] as? [String: Any])?["id"] as? String == id && sent?["event"] as? String == "completed",
                "\(sent ?? [:])")
        let rows = try PostgresConnection(url: cluster.databaseURL, timeout: 5)
            .execute("SELECT claimed_by, outcome FROM webhook_deliveries").rows
        #expect(rows.count == 1 && rows.first?[0] != nil && rows.first?[1] == nil, "claimed, not ended: \(rows)")
        // Killed now, well inside the try's 10 s bound. Killed after the survivors' start-up (over
        // 10 s on a loaded machine) the try could time out first: that replica would then try again
        // about 1 s later under a new 15 s claim, and the takeover would wait for that one.
        _ = try await cluster[0].stop(signal: SIGKILL)
        // Only now do the others start: the claim and the try in flight were the first replica's.
        try await cluster.add(2)
        // The survivors can send only once they run: their start-up (seconds on a busy machine) is not the claim's.
        let survivorsUp = Date().timeIntervalSince(firstSeen)

        let got = try await receiver.waitFor(2, timeout: 2 * Self.claimSeconds + 20)
        let took = got[1].at.timeIntervalSince(firstSeen)
        let sinceAsked = got[1].at.timeIntervalSince(asked)
        #expect(sinceAsked >= Self.claimSeconds, "not sent again while the claim held: \(sinceAsked) s after the POST")
        // Usually about `claimSeconds` (ClusterWebhooksLiveTests times the takeover in one process,
        // with a short claim). A survivor's claim whose answer is lost (a statement past its
        // deadline on a loaded machine) holds the delivery for one more claim: at least once, later.
        var storeErrors = 0.0
        for replica in cluster.replicas.dropFirst() {
            storeErrors += await cluster.metric("download_service_webhook_store_errors_total", on: replica) ?? 0
        }
        #expect(took <= max(Self.claimSeconds, survivorsUp) + (storeErrors > 0 ? Self.claimSeconds : 0) + 10,
                "sent again once the claim lapsed: \(took) s after the first try, the survivors up after \(survivorsUp) s, \(storeErrors) store errors")
        #expect(got[1].body == got[0].body, "the same body")
        #expect(got[1].headers["x-delivery-id"] != nil && got[1].headers["x-delivery-id"] == got[0].headers["x-delivery-id"],
                "the same delivery: \(got.map { $0.headers["x-delivery-id"] ?? "-" })")
        try await Task.sleep(for: .seconds(2))  // Rounds of both survivors: a third POST would come.
        #expect(receiver.received.count == 2, "sent again once: \(receiver.received.count) POSTs")
        // The survivor records the outcome after the receiver answered: polled, not read once.
        var delivered = 0.0
        let deadline = Date().addingTimeInterval(15)
        while true {
            delivered = 0
            for replica in cluster.replicas.dropFirst() {
                delivered += await cluster.metric("download_service_webhook_deliveries_total", on: replica) ?? 0
            }
            guard delivered < 1 && Date() < deadline else { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(delivered == 1, "one survivor recorded it delivered: \(delivered)")
        let after = try PostgresConnection(url: cluster.databaseURL, timeout: 5)
            .execute("SELECT outcome FROM webhook_deliveries").rows
        #expect(after.isEmpty || (after.count == 1 && after[0][0] == "delivered"), "\(after)")
        await cluster.stop()
    }
}
