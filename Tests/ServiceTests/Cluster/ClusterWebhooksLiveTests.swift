import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// Completion webhooks across replicas, live: engines in one process on one real PostgreSQL, a
/// real receiver on loopback. A delivery is made and sent once for the cluster, whichever replica
/// took the callback and whichever holds the download; a replica that dies after claiming a
/// delivery leaves it to another, which sends it once its claim lapsed.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterWebhooksLiveTests {
    static func settings() -> WebhookSettings {
        WebhookSettings(render: { event, id, snapshot in
            Array(#"{"deliveryId":"\#(id)","download":"\#(snapshot.id)","event":"\#(event.rawValue)"}"#.utf8)
        }, secret: nil, userAgent: "download-service/test", report: { _ in })
    }

    /// The deliveries in `database`: (claimed by, outcome, tries).
    static func deliveries(_ database: String) throws -> [(claimedBy: String?, outcome: String?, tries: Int)] {
        try PostgresConnection(url: database, timeout: 5).execute("SELECT claimed_by, outcome, tries FROM webhook_deliveries").rows
            .map { ($0[0], $0[1], $0[2].flatMap { Int($0) } ?? 0) }
    }

    @Test func aDeliveryIsSentOnceWhenTwoReplicasRun() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        try await ClusterLeaseLiveTests.withReplicas { c, database, origin, a, b in
            for engine in [a, b] { engine.webhooks.start(Self.settings()) }
            let enqueued = try a.request(DownloadRequest(url: origin.url))
            // The callback is taken by the replica that does not hold the download.
            try b.webhooks.register(CallbackRequest(url: receiver.url("/done")), token: enqueued.token, snapshot: enqueued.snapshot)
            c.expect(ClusterLeaseLiveTests.wait(30) { receiver.received.count >= 1 }, "delivered")
            usleep(2_000_000)  // Time for a second delivery, were there one: two rounds of each replica.
            let got = receiver.received
            c.expect(got.count == 1, "one POST: \(got.count)")
            let first = try c.require(got.first)
            c.expect(first.json?["event"] as? String == "completed" && first.json?["download"] as? String == enqueued.snapshot.id)
            c.expect(first.headers["x-delivery-id"] == first.json?["deliveryId"] as? String, "\(first.headers)")
            let rows = try Self.deliveries(database)
            c.expect(rows.count == 0 || (rows.count == 1 && rows[0].outcome == "delivered"), "\(rows)")
            let delivered = [a, b].map { $0.webhooks.statistics.deliveries[.delivered] ?? 0 }
            c.expect(delivered.reduce(0, +) == 1, "\(delivered)")
        }
    }

    @Test func aDeliveryClaimedByAReplicaThatDiedIsSentByAnother() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        try await ClusterLeaseLiveTests.withReplicas { c, database, origin, a, b in
            let dying = try c.require(a.webhooks.cluster)
            dying.claimSecondsForTests = 1.5
            dying.abandonsClaimsForTests.store(true, ordering: .releasing)
            a.webhooks.start(Self.settings())
            let enqueued = try a.request(DownloadRequest(url: origin.url))
            try a.webhooks.register(CallbackRequest(url: receiver.url("/done")), token: enqueued.token, snapshot: enqueued.snapshot)
            try c.expect(try ClusterLeaseLiveTests.wait(30) {
                try Self.deliveries(database).first?.claimedBy?.hasPrefix("a/") == true
            }, "a claimed the delivery")
            a.webhooks.cluster?.stop()  // a is gone: it never sends nor records
            let claimedAt = Date()
            b.webhooks.start(Self.settings())
            c.expect(ClusterLeaseLiveTests.wait(10) { receiver.received.count >= 1 }, "b delivers")
            let took = try c.require(receiver.received.first).at.timeIntervalSince(claimedAt)
            c.expect(took <= 1.5 + 1.5, "after a's claim lapsed: \(took) s")
            usleep(1_500_000)
            c.expect(receiver.received.count == 1, "once: \(receiver.received.count)")
            c.expect(b.webhooks.statistics.deliveries[.delivered] == 1)
        }
    }
}
