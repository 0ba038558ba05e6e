import DownloaderEngine
import Testing
import Foundation

extension ClusterLeaseLiveTests {
    /// Replicas `a` and `b` (throttled origin of 3 MiB, one database, one shared directory, leases of
    /// `ttl` seconds) for `body`, then shut down.
    static func withReplicas(ttl: Double = ClusterLeaseLiveTests.ttl,
                             _ body: @escaping @Sendable (BlockingChecks, String, TestOrigin, DownloadEngine, DownloadEngine) throws -> Void)
        async throws {
        try await blocking { c in
            let database = try PostgresServer.shared.createDatabase()
            let origin = try TestOrigin(bodySize: 3 << 20, settings: Self.throttled)
            defer { origin.stop() }
            let shared = Self.sharedDirectory()
            defer { try? FileManager.default.removeItem(at: shared) }
            let a = try Self.replica("a", database: database, shared: shared, ttl: ttl)
            let b = try Self.replica("b", database: database, shared: shared, ttl: ttl)
            defer { Self.shutdown([a, b]) }
            try body(c, database, origin, a, b)
        }
    }
}

extension ClusterLeaseLiveTests {
    /// A token is in the database when its request is answered: the second request's commit would
    /// otherwise wait out the writer's minimum interval after the first's, and `b` would not find it.
    @Test func aTokenIsFoundOnAnotherReplicaAsSoonAsItsRequestIsAnswered() async throws {
        try await Self.withReplicas { c, _, origin, a, b in
            origin.addResource(path: "/second", size: 3 << 20)
            let first = try a.request(DownloadRequest(url: origin.url))
            let second = try a.request(DownloadRequest(url: origin.url("/second")))
            for token in [first.token, second.token] {
                c.expect(b.placement(ofToken: token) == .elsewhere(ownerURL: "http://a.invalid"), "b finds \(token) at a")
            }
            c.expect(a.cancel(token: second.token)?.state == .paused, "a cancels its own")
        }
    }
}
