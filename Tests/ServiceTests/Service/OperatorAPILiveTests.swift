import Foundation
import Glibc
import Testing

/// The operator API through the real service: auth before routing, pause (a hold callers cannot
/// lift) and resume, remove (with every trace of the download gone), `/fetch` readers of a removed
/// download aborted, the tombstone and the hold surviving SIGKILL, and retention.
@Suite(.timeLimit(.minutes(3)))
struct OperatorAPILiveTests {
    static let allow = ["--allow-private-networks"]

    static func root(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ds-op-\(name)-\(UUID().uuidString)")
    }

    @Test func adminAuthComesBeforeTheRouteAndTheAdminTokenWorksEverywhere() async throws {
        let service = try await ServiceProcess.start(arguments: ["--auth-token", "caller-secret", "--admin-token", "admin-secret"])
        let client = service.client
        let caller = ["Authorization": "Bearer caller-secret"]
        let admin = ["Authorization": "Bearer admin-secret"]
        for path in ["/admin/downloads/abc/pause", "/admin/no/such/route", "/admin"] {
            let none = try await client.request("POST", path)
            #expect(none.status == 401, "\(path)")
            #expect(none.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            #expect((none.json["error"] as? [String: Any])?["code"] as? String == "unauthorized")
            let wrong = try await client.request("POST", path, headers: caller)
            #expect(wrong.status == 403, "\(path)")
            #expect((wrong.json["error"] as? [String: Any])?["code"] as? String == "forbidden")
        }
        #expect(try await client.request("POST", "/admin/downloads/abc/pause", headers: admin).status == 404)
        #expect(try await client.request("POST", "/admin/no/such/route", headers: admin).status == 404)
        let method = try await client.request("GET", "/admin/downloads/abc/pause", headers: admin)
        #expect(method.status == 405 && method.header("Allow") == "POST")
        // The admin token is accepted wherever the caller token is; no token still is not.
        #expect(try await client.request("GET", "/downloads", headers: admin).status == 200)
        #expect(try await client.request("GET", "/downloads", headers: caller).status == 200)
        #expect(try await client.request("GET", "/downloads").status == 401)
        #expect(try await service.stop() == 0)
    }

    @Test func withoutAnAdminTokenAdminFollowsTheCallerToken() async throws {
        let service = try await ServiceProcess.start(arguments: ["--auth-token", "caller-secret"])
        #expect(try await service.client.request("DELETE", "/admin/downloads/abc").status == 401)
        #expect(try await service.client.request("DELETE", "/admin/downloads/abc",
                                                 headers: ["Authorization": "Bearer nope"]).status == 403)
        #expect(try await service.client.request("DELETE", "/admin/downloads/abc",
                                                 headers: ["Authorization": "Bearer caller-secret"]).status == 404)
        #expect(try await service.stop() == 0)
        let open = try await ServiceProcess.start()
        #expect(try await open.client.request("DELETE", "/admin/downloads/abc").status == 404)
        #expect(try await open.stop() == 0)
    }

    @Test func pauseHoldsResumeLiftsAndRemoveLeavesNothing() async throws {
        let origin = try TestOrigin(bodySize: 400_000, settings: { var s = TestOrigin.Settings(); s.bytesPerSecond = 40_000; return s }())
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allow)
        let client = service.client
        let created = try await client.ask(origin.url)
        let id = try #require(created.string("id"))
        let token = try #require(created.string("token"))
        let (head, stream) = try await client.openStream("/downloads/\(id)/progress")
        defer { stream.close() }
        #expect(head.status == 200)
        _ = try await stream.next { ($0.json["bytesWritten"] as? Int ?? 0) > 0 }
        let paused = try await client.request("POST", "/admin/downloads/\(id)/pause")
        #expect(paused.status == 200 && paused.string("state") == "paused" && paused.string("pausedBy") == "operator")
        let told = try #require(try await stream.next { $0.event == "paused" })
        #expect(told.json["by"] as? String == "operator" && told.json["state"] as? String == "paused")
        #expect(try await client.request("POST", "/admin/downloads/\(id)/pause").status == 200, "idempotent")
        // A caller asking again gets a token and the paused snapshot; nothing starts.
        let again = try await client.ask(origin.url)
        #expect(again.status == 202 && again.string("id") == id && again.string("state") == "paused" && again.string("token") != nil)
        let requestsWhilePaused = origin.requests(path: "/file").count
        // Resume: it runs again (callers remain) and completes.
        origin.update { $0.bytesPerSecond = nil }
        let resumed = try await client.request("POST", "/admin/downloads/\(id)/resume")
        #expect(resumed.status == 200)
        let done = try #require(try await stream.next { $0.event == "completed" || $0.event == "failed" })
        #expect(done.event == "completed")
        // Nothing started while paused: the resume is the only request since, and goes on from the kept bytes.
        let since = origin.requests(path: "/file").dropFirst(requestsWhilePaused)
        #expect(since.count == 1 && since.first?.header("Range")?.hasPrefix("bytes=") == true && since.first?.header("Range") != "bytes=0-",
                "\(since.map { $0.header("Range") ?? "-" })")
        let conflict = try await client.request("POST", "/admin/downloads/\(id)/pause")
        #expect(conflict.status == 409 && (conflict.json["error"] as? [String: Any])?["code"] as? String == "invalid_state")
        let path = try #require(try await client.request("GET", "/downloads/\(id)").string("path"))
        // Remove: 200 with the id and state; then the id, its file, its stream and its tokens are 404.
        let removed = try await client.request("DELETE", "/admin/downloads/\(id)")
        #expect(removed.status == 200 && removed.string("id") == id && removed.string("state") == "removed")
        for probe in ["/downloads/\(id)", "/downloads/\(id)/file", "/downloads/\(id)/progress"] {
            #expect(try await client.request("GET", probe).status == 404, "\(probe)")
        }
        #expect(try await client.request("DELETE", "/downloads/\(token)").status == 404)
        #expect(try await client.request("DELETE", "/admin/downloads/\(id)").status == 404)
        try await withTimeout(5) { while FileManager.default.fileExists(atPath: path) { try await Task.sleep(for: .milliseconds(20)) } }
        // A later POST starts afresh under a new id; removing it while it runs ends its stream with `removed`.
        origin.update { $0.bytesPerSecond = 20_000 }
        let fresh = try await client.ask(origin.url)
        let freshID = try #require(fresh.string("id"))
        #expect(freshID != id && fresh.json["coalesced"] as? Bool == false)
        let (_, watching) = try await client.openStream("/downloads/\(freshID)/progress")
        defer { watching.close() }
        _ = try await watching.next()
        #expect(try await client.request("DELETE", "/admin/downloads/\(freshID)").status == 200)
        let last = try #require(try await watching.next { $0.event != "progress" && $0.event != "resumed" })
        #expect(last.event == "removed" && last.json["by"] as? String == "operator" && last.json["state"] as? String == "removed")
        #expect(try await watching.next() == nil, "removed ends the stream")
        #expect(try await service.stop() == 0)
    }

    @Test func fetchReadersWaitThroughAnOperatorPauseAndAreAbortedByARemoval() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000, settings: { var s = TestOrigin.Settings(); s.bytesPerSecond = 50_000; return s }())
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allow)
        let connection = try await RawHTTPClient.connect(port: service.port)
        defer { connection.close() }
        let target = origin.url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        try await connection.send("GET /fetch?url=\(target) HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try await connection.readResponseHead()
        #expect(head.status == 200)
        let id = try #require(head.header("X-Download-Id"))
        // Paused by the operator: the reader stays connected, waiting.
        #expect(try await service.client.request("POST", "/admin/downloads/\(id)/pause").status == 200)
        let snapshot = try await service.client.request("GET", "/downloads/\(id)")
        #expect(snapshot.string("state") == "paused" && snapshot.json["callers"] as? Int == 1)
        // Removed: the reader's response is aborted (never completes).
        #expect(try await service.client.request("DELETE", "/admin/downloads/\(id)").status == 200)
        let aborted = try await withTimeout(10) { () async throws -> Bool in
            do {
                if let length = head.header("Content-Length").flatMap(Int.init) {
                    _ = try await connection.readExactBody(count: length)  // throws when the connection ends short
                } else {
                    while try await connection.readChunk() != nil {}  // throws without the last chunk
                }
                return false
            } catch {
                return true
            }
        }
        #expect(aborted, "the /fetch response ended as if complete")
        #expect(try await service.stop() == 0)
    }

    /// A `/fetch` of a download the operator holds waits for the stall timeout, then answers `504 stalled`.
    @Test func fetchOfAHeldDownloadWaitsForTheStallTimeoutAtMost() async throws {
        let origin = try TestOrigin(bodySize: 2_000_000, settings: { var s = TestOrigin.Settings(); s.bytesPerSecond = 50_000; return s }())
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allow + ["--stall-timeout", "1"])
        let id = try #require(try await service.client.ask(origin.url).string("id"))
        #expect(try await service.client.request("POST", "/admin/downloads/\(id)/pause").status == 200)
        let target = origin.url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let started = Date()
        let answer = try await service.client.request("GET", "/fetch?url=\(target)")
        #expect(answer.status == 504 && (answer.json["error"] as? [String: Any])?["code"] as? String == "stalled")
        #expect(Date().timeIntervalSince(started) >= 0.9)
        #expect(try await service.client.request("GET", "/downloads/\(id)").string("state") == "paused")
        #expect(try await service.stop() == 0)
    }

    /// Remove, SIGKILL at once, restart: the download stays removed and its file gone; an operator
    /// hold made before the kill is still in force.
    @Test func removedStaysRemovedAndHeldStaysHeldAcrossSIGKILL() async throws {
        let origin = try TestOrigin(bodySize: 300_000, path: "/done.bin")
        origin.addResource(path: "/slow.bin", size: 2_000_000)
        origin.update { $0.bytesPerSecond = 100_000 }
        defer { origin.stop() }
        let root = Self.root("kill")
        var service = try await ServiceProcess.start(root: root, arguments: Self.allow)
        origin.update { $0.bytesPerSecond = nil }
        let done = try #require(try await service.client.ask(origin.url("/done.bin")).string("id"))
        #expect(try await service.waitForEnd(id: done)["state"] as? String == "completed")
        let path = try #require(try await service.client.request("GET", "/downloads/\(done)").string("path"))
        origin.update { $0.bytesPerSecond = 100_000 }
        let slow = try #require(try await service.client.ask(origin.url("/slow.bin")).string("id"))
        _ = try await service.waitForEvent(id: slow, "bytes") { ($0.json["bytesWritten"] as? Int ?? 0) > 0 }
        #expect(try await service.client.request("POST", "/admin/downloads/\(slow)/pause").status == 200)
        #expect(try await service.client.request("DELETE", "/admin/downloads/\(done)").status == 200)
        #expect(try await service.stop(signal: SIGKILL) == SIGKILL)
        service = try await ServiceProcess.start(root: root, arguments: Self.allow)
        #expect(try await service.client.request("GET", "/downloads/\(done)").status == 404)
        #expect(!FileManager.default.fileExists(atPath: path))
        let held = try await service.client.request("GET", "/downloads/\(slow)")
        #expect(held.string("state") == "paused" && held.string("pausedBy") == "operator")
        // A caller's POST does not lift the hold after the restart either; a POST of the removed URL starts afresh.
        #expect(try await service.client.ask(origin.url("/slow.bin")).string("state") == "paused")
        let fresh = try await service.client.ask(origin.url("/done.bin"))
        #expect(fresh.string("id") != done)
        #expect(try await service.stop() == 0)
        try? FileManager.default.removeItem(at: root)
    }

    @Test func retentionRemovesAnUnaskedCacheFileCountsAndLogsIt() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allow + ["--cache-ttl", "3s"])
        let id = try #require(try await service.client.ask(origin.url).string("id"))
        // The service's own story lines time it (a progress stream of a completed download ends at
        // once, before any removal; polling would measure the loaded machine's latency).
        let removed = try #require(try await service.waitForLogLine(timeout: 20) {
            $0.contains(#""event":"removed""#) && $0.contains(id)
        })
        #expect(removed.contains(#""by":"retention""#))
        let completed = try #require(service.logLines.first { $0.contains(#""event":"completed""#) && $0.contains(id) })
        func ts(_ line: String) throws -> Date {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return try #require((object["ts"] as? String).flatMap(formatter.date(from:)))
        }
        // Due within 3 s + 1 s of the completion (2 s of slack for a loaded machine's timers; the
        // bound itself is checked on a manual clock in `EngineRetentionTests`).
        let after = try ts(removed).timeIntervalSince(try ts(completed))
        #expect(after >= 3 && after < 6, "removed \(after) s after completion")
        #expect(try await service.client.request("GET", "/downloads/\(id)").status == 404)
        let metrics = try await service.client.request("GET", "/metrics").text
        #expect(metrics.contains(#"download_service_purged_total{kind="cache_file",reason="ttl"} 1"#))
        let line = try await service.waitForLogLine(timeout: 5) { $0.contains(#""event":"purged""#) && $0.contains(id) }
        #expect(line?.contains(#""reason":"ttl""#) == true)
        #expect(try await service.stop() == 0)
    }
}
