import DownloaderEngine
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
