import Foundation
import Testing
@testable import DownloaderEngine

/// A replica whose cluster database does not answer keeps its webhook rounds going and counts each
/// failed call (`download_service_webhook_store_errors_total`): an operator sees why deliveries wait.
@Suite(.timeLimit(.minutes(1)))
struct ClusterWebhookStoreErrorsTests {
    @Test func roundsAgainstAnUnreachableDatabaseAreCounted() async throws {
        let h = WebhookDispatcherTests.Harness()
        let egress = EgressRules(allowPrivateNetworks: true)
        let dispatcher = try WebhookDispatcher(journal: WebhookJournal(path: ":memory:"), poster: CurlWebhookPoster(egress: egress),
                                               scheduler: h.scheduler, random: FixedRandom(unit: 0.5), egress: egress,
                                               lookup: { _ in nil })
        // Port 1 on loopback: nothing listens, every connection is refused at once.
        let pool = PostgresPool(url: "postgresql://nobody@127.0.0.1:1/none", capacity: 1, connectTimeout: 1, statementTimeout: 1)
        let cluster = ClusterWebhooks(pool: pool, ignoring: [], scheduler: h.scheduler, owner: "a/test")
        defer { cluster.stop() }
        dispatcher.lock.withLock { dispatcher.cluster = cluster }
        dispatcher.start(ClusterWebhooksLiveTests.settings())
        #expect(dispatcher.statistics.storeErrors == 0)
        h.scheduler.advance(0)  // The first round: its owed deliveries and its claim both fail.
        try await withTimeout(20) {
            while dispatcher.statistics.storeErrors < 2 { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        // The next round is still scheduled, and counts again.
        try await h.waitForTimer(dueIn: ClusterWebhooks.interval)
        let before = dispatcher.statistics.storeErrors
        h.scheduler.advance(ClusterWebhooks.interval)
        try await withTimeout(20) {
            while dispatcher.statistics.storeErrors <= before { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        #expect(dispatcher.statistics.tries == 0 && dispatcher.statistics.deliveries.isEmpty)
    }
}
