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
        // Shutdown's commits and lease releases meet a database that just thawed (new connections,
        // every queued probe's backend forked first): a longer budget, and what happened if not 0.
        let status = try await service.stop(timeout: 60)
        #expect(status == 0, "exit \(status.map(String.init) ?? "none within 60 s"): \(service.logLines.suffix(30).joined(separator: "\n"))")
        try await onThread { postgres.stop() }  // Blocking (≤ 10 s): off the cooperative pool.
    }

    /// A database that stops answering without closing its connections (frozen with `SIGSTOP`):
    /// requests that need it wait at most a statement's deadline (2 s for a 4 s lease TTL), then
    /// are answered (503 `database_unavailable` once it counts as lost); meanwhile `/healthz` answers at once (those requests wait on
    /// threads of their own, not on the event loop), and says the database is unreachable once a
    /// statement has missed its deadline. Everything recovers when the server wakes.
    @Test func aFrozenDatabaseNeverStopsTheReplicasAPI() async throws {
        let postgres = try await onThread { try PostgresServer() }
        let url = try await onThread { try postgres.createDatabase() }
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("shared-\(UUID().uuidString)").path
        let service = try await ServiceProcess.start(arguments: ["--cluster-db", url, "--shared-dir", shared, "--lease-ttl", "4",
                                                                 "--auth-token", "tok"])
        let auth = ["Authorization": "Bearer tok"]
        #expect(try await service.client.request("GET", "/downloads", headers: auth).status == 200)

        postgres.signalAll(SIGSTOP)
        let frozenAt = Date()
        // More requests that need the database than this machine has event loops, all waiting at
        // once (`/metrics` counts the downloads in the database too).
        let waiting = Task {
            try await withThrowingTaskGroup(of: (Int, String?, Double).self) { group in
                for path in ["/downloads", "/downloads", "/downloads", "/metrics"] {
                    group.addTask {
                        let answer = try await service.client.request("GET", path, headers: auth)
                        let code = (answer.json["error"] as? [String: Any])?["code"] as? String
                        return (answer.status, code, Date().timeIntervalSince(frozenAt))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let asked = Date()
        let health = try await service.client.request("GET", "/healthz")
        // Waiting for the database would take its 2 s statement deadline plus the 5 s pool wait.
        #expect(health.status == 200 && Date().timeIntervalSince(asked) < 5, "/healthz waited for the frozen database")
        let answers = try await waiting.value
        for (status, code, after) in answers {
            // The list answers with what this replica holds when the database fails under it.
            #expect(status == 200 || (status == 503 && code == "database_unavailable"), "\(status) \(code ?? "-")")
            // At most a free connection's wait (2 s), a connect (3 s) and the statement's deadline
            // (2 s), and this loaded process's own delay: bounded, never the freeze's whole length.
            #expect(after < 13, "answered \(after) s after the freeze: past the statement's 2 s deadline")
        }
        let lost = try await poll(service, "/healthz") { $0.string("database") == "unreachable" }
        #expect(lost.status == 200 && lost.string("database") == "unreachable")

        postgres.signalAll(SIGCONT)
        let back = try await poll(service, "/readyz", seconds: 20) { $0.status == 200 }
        #expect(back.status == 200)
        #expect(try await service.client.request("GET", "/downloads", headers: auth).status == 200)
        #expect(try await service.stop() == 0)
        try await onThread { postgres.stop() }
    }
}
