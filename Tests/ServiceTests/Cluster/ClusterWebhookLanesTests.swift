import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Cluster mode's webhook claims keep per-receiver lanes, as the single process does: at most
/// `perReceiver` deliveries of one receiver host claimed (counting the replica's tries in flight),
/// so a slow receiver's due deliveries never take every worker, and the others' are found behind them.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterWebhookLanesTests {
    @Test func claimsTakeAtMostTwoPerReceiverAndFindTheOthersBehind() async throws {
        try await blocking { c in
            let url = try PostgresServer.shared.createDatabase()
            let store = ClusterWebhookStore(pool: try PostgresStateStore(pool: PostgresPool(url: url, capacity: 2)).pool)
            // Ten deliveries to one slow host first (two ports, a user part, any case), then one each to two others.
            let receivers = (0..<10).map { "http://hook@Slow.Example:\(8000 + $0 % 2)/d/\($0)" }
                + ["https://fast.example/d", "http://[::1]:9/d"]
            for (n, receiver) in receivers.enumerated() {
                let registration = WebhookRegistration(id: "r\(n)", downloadID: "d\(n)", tokenHash: TokenHash(token: "t\(n)"),
                                                       url: receiver, events: [.completed], createdAt: Date())
                try store.insert(registration)
                try c.expect(store.make(WebhookDelivery(id: "w\(n)", registrationID: "r\(n)", event: .completed, body: [1],
                                                        tries: 0, nextAt: Date())))
                usleep(2_000)  // Due in this order.
            }
            _ = try store.pool.withConnection { db throws(StateStoreError) in
                try db.execute("UPDATE webhook_deliveries SET next_at = now() - make_interval(secs => 100 - substring(id FROM 2)::int)")
            }
            let first = try store.claim(owner: "A", seconds: 30, limit: 32)
            let taken = Dictionary(grouping: first, by: \.receiver).mapValues(\.count)
            c.expect(taken == ["slow.example": 2, "fast.example": 1, "[::1]": 1], "\(taken)")
            c.expect(first.filter { $0.receiver == "slow.example" }.map(\.claimed.delivery.id) == ["w0", "w1"], "oldest first")
            // The two slow tries still run here: nothing more of that host, however many workers are free.
            let second = try store.claim(owner: "A", seconds: 30, limit: 32, running: ["slow.example": 2])
            c.expect(second.isEmpty, "\(second.map(\.receiver))")
            // One of them ended: one more.
            let third = try store.claim(owner: "A", seconds: 30, limit: 32, running: ["slow.example": 1])
            c.expect(third.map(\.claimed.delivery.id) == ["w2"], "\(third.map(\.claimed.delivery.id))")
            // Another replica has lanes of its own.
            let other = try store.claim(owner: "B", seconds: 30, limit: 1)
            c.expect(other.map(\.claimed.delivery.id) == ["w3"], "\(other.map(\.claimed.delivery.id))")
        }
    }
}
