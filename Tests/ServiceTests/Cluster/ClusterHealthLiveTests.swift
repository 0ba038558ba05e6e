import Foundation
import Glibc
import Testing

/// A replica in cluster mode on a real PostgreSQL that goes away and comes back: `/healthz` stays
/// 200 and names the database's reachability, `/readyz` and what needs the database answer 503
/// `database_unavailable` with `Retry-After` while it is lost, and all of it recovers when it returns.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct ClusterHealthLiveTests {
    /// Polls `path` until `matches` holds (at most `seconds`); the last answer.
    func poll(_ service: ServiceProcess, _ path: String, seconds: Double = 10,
              until matches: (RawHTTPResponse) -> Bool) async throws -> RawHTTPResponse {
        let deadline = Date().addingTimeInterval(seconds)
        var last = try await service.client.request("GET", path)
        while !matches(last) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            last = try await service.client.request("GET", path)
        }
        return last
    }

    @Test func healthAndReadinessFollowTheDatabase() async throws {
        let postgres = try await onThread { try PostgresServer() }
        let url = try await onThread { try postgres.createDatabase() }
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("shared-\(UUID().uuidString)").path
        let service = try await ServiceProcess.start(arguments: ["--cluster-db", url, "--shared-dir", shared, "--lease-ttl", "1",
                                                                 "--auth-token", "tok"])
        let health = try await service.client.request("GET", "/healthz")
        #expect(health.status == 200 && health.string("status") == "ok" && health.string("database") == "reachable")
        let ready = try await service.client.request("GET", "/readyz")
        #expect(ready.status == 200 && ready.string("status") == "ready", "no token needed, like /healthz")
        let list = try await service.client.request("GET", "/downloads", headers: ["Authorization": "Bearer tok"])
        #expect(list.status == 200)
        for area in ["cache", "persistent", "partial"] {
            #expect(FileManager.default.fileExists(atPath: shared + "/" + area), "\(area) under --shared-dir")
        }

        try await onThread { postgres.stop(removing: false) }
        let lost = try await poll(service, "/healthz") { $0.string("database") == "unreachable" }
        #expect(lost.status == 200 && lost.string("database") == "unreachable", "liveness stays 200")
        let notReady = try await service.client.request("GET", "/readyz")
        #expect(notReady.status == 503 && notReady.header("Retry-After") != nil)
        #expect((notReady.json["error"] as? [String: Any])?["code"] as? String == "database_unavailable")
        let refused = try await service.client.request("GET", "/downloads", headers: ["Authorization": "Bearer tok"])
        #expect(refused.status == 503 && refused.header("Retry-After") != nil)
        #expect((refused.json["error"] as? [String: Any])?["code"] as? String == "database_unavailable")

        try await onThread { try postgres.start() }
        let back = try await poll(service, "/readyz", seconds: 15) { $0.status == 200 }
        #expect(back.status == 200)
        #expect(try await service.client.request("GET", "/downloads", headers: ["Authorization": "Bearer tok"]).status == 200)
        #expect(!service.logLines.contains { $0.contains(PostgresServer.password) }, "the password is never logged")
        #expect(service.logLines.contains { $0.contains("cluster database reached") && $0.contains("127.0.0.1:\(postgres.port)/") })
        #expect(service.logLines.contains { $0.contains(#""msg":"listening""#) && $0.contains(#""cacheDir":"\#(shared)/cache""#) },
                "the first line names the shared areas")
        #expect(try await service.stop() == 0)
        try await onThread { postgres.stop() }  // Blocking (≤ 10 s): off the cooperative pool.
    }
}
