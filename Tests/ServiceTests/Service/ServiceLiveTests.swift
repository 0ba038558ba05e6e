import Foundation
import Testing

/// Live tests through the real `download-service` executable, against the in-process `TestOrigin`
/// on loopback (hence `--allow-private-networks`). Every wait is bounded by socket timeouts.
@Suite(.timeLimit(.minutes(2)))
struct ServiceLiveTests {
    static let allowLoopback = ["--allow-private-networks"]

    /// An origin whose transfer is held at 1 MiB for up to `seconds` (ended earlier by setting
    /// `stallBound` to 0), then dropped: a download pauses or resumes there however loaded the
    /// machine is. The caller stops it.
    static func originStallingAtOneMiB(bodySize: Int = 4 << 20, seconds: Double = 60) throws -> TestOrigin {
        let origin = try TestOrigin(bodySize: bodySize)
        origin.update { $0.stallBound = seconds }
        origin.inject(.stall(afterBodyBytes: 1 << 20))
        return origin
    }

    /// Waits until download `id` has written the 1 MiB its origin stalls at.
    static func waitForTheStall(_ service: ServiceProcess, id: String) async throws {
        _ = try await service.waitForEvent(id: id, "the stall") { $0.json["bytesWritten"] as? Int == 1 << 20 }
    }

    /// `DELETE /downloads/{token}` with the token `created` answered.
    static func cancel(_ service: ServiceProcess, _ created: RawHTTPResponse) async throws -> RawHTTPResponse {
        try await service.client.request("DELETE", "/downloads/\(try #require(created.string("token")))")
    }

    @Test func callersJourneyFromPostToFile() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20, path: "/pkg/data.bin")
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback)
        let client = service.client

        let created = try await client.post("/downloads", json: #"{"url":"\#(origin.url)","storage":"persistent"}"#)
        #expect(created.status == 202)
        let id = try #require(created.string("id"))
        let token = try #require(created.string("token"))
        #expect(created.header("Location") == "/downloads/\(id)")
        #expect(token != id && token.count >= 32)
        #expect(created.json["coalesced"] as? Bool == false)
        let links = try #require(created.json["links"] as? [String: String])
        #expect(links == ["self": "/downloads/\(id)", "progress": "/downloads/\(id)/progress",
                          "file": "/downloads/\(id)/file", "cancel": "/downloads/\(token)"])

        let done = try await service.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        let snapshot = try await client.request("GET", "/downloads/\(id)")
        #expect(snapshot.string("state") == "completed")
        #expect(snapshot.json["size"] as? Int == 3 << 20)
        #expect(snapshot.string("storage") == "persistent")
        let path = try #require(snapshot.string("path"))
        #expect(path.hasPrefix(service.root.appendingPathComponent("data").path))

        let file = try await client.request("GET", "/downloads/\(id)/file")
        #expect(file.status == 200)
        #expect(file.body == origin.expectedBody())
        #expect(file.header("ETag") == "\"\(snapshot.string("sha256") ?? "-")\"")
        #expect(file.header("Content-Disposition")?.contains("data.bin") == true)
        let range = try await client.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=100-199"])
        #expect(range.status == 206)
        #expect(range.body == Array(origin.expectedBody()[100..<200]))
        let head = try await client.request("HEAD", "/downloads/\(id)/file")
        #expect(head.status == 200 && head.header("Content-Length") == String(3 << 20) && head.body.isEmpty)

        let again = try await client.ask(origin.url)
        #expect(again.status == 200)
        #expect(again.string("id") == id && again.json["coalesced"] as? Bool == true)
        #expect(origin.getCount(path: "/pkg/data.bin") == 1)

        let list = try await client.request("GET", "/downloads?state=completed")
        #expect((list.json["downloads"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])
        let metrics = try await client.request("GET", "/metrics")
        #expect(metrics.text.contains("download_service_downloads{state=\"completed\"} 1"))
        #expect(metrics.text.contains("download_service_coalesced_joins_total 1"))
        #expect(metrics.text.contains("download_service_bytes_served_total \((3 << 20) + 100)\n"))
        // What /fetch serves is file bytes too.
        let encoded = try #require(origin.url.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let fetched = try await client.request("GET", "/fetch?url=\(encoded)")
        #expect(fetched.status == 200 && fetched.body == origin.expectedBody())
        var counted = false  // (the access log counts a response once it ended: a bounded wait)
        for _ in 0..<50 where !counted {
            counted = try await client.request("GET", "/metrics").text.contains("download_service_bytes_served_total \((6 << 20) + 100)\n")
            if !counted { try await Task.sleep(nanoseconds: 100_000_000) }
        }
        #expect(counted)
        #expect(try await service.stop() == 0)
    }

    @Test func twoCallersCoalesceAndOneCancelling() async throws {
        // The origin holds the transfer at 1 MiB until the cancel is in, then drops it: the cancel
        // lands mid-transfer however loaded the machine is, and the download carries on with a resume.
        let origin = try Self.originStallingAtOneMiB()
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback)
        let client = service.client

        let first = try await client.ask(origin.url)
        let second = try await client.ask(origin.url)
        let id = try #require(first.string("id"))
        #expect(second.string("id") == id)
        #expect(second.json["coalesced"] as? Bool == true)
        #expect(first.string("token") != second.string("token"))

        try await Self.waitForTheStall(service, id: id)
        let cancelled = try await Self.cancel(service, first)
        #expect(cancelled.status == 200)
        #expect(cancelled.json["callers"] as? Int == 1)
        #expect(cancelled.string("state") == "downloading")
        let reused = try await Self.cancel(service, first)
        #expect(reused.status == 404)
        origin.update { $0.stallBound = 0 }  // Ends the stall: the origin drops the connection.

        let done = try await service.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        let file = try await client.request("GET", "/downloads/\(id)/file")
        #expect(file.body == origin.expectedBody())
        let gets = origin.requests(path: origin.path).filter { $0.method == "GET" }
        #expect(gets.filter { $0.header("range") == nil }.count == 1)  // one transfer, resumed, never restarted
        #expect(gets.last?.header("range") == "bytes=\(1 << 20)-")
        #expect(try await service.stop() == 0)
    }

    @Test func lastCallerCancelPausesAndANewRequestResumesFromTheKeptOffset() async throws {
        let origin = try Self.originStallingAtOneMiB()  // the cancel lands at exactly 1 MiB
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback)
        let client = service.client

        let first = try await client.ask(origin.url)
        let id = try #require(first.string("id"))
        try await Self.waitForTheStall(service, id: id)
        let paused = try await Self.cancel(service, first)
        #expect(paused.string("state") == "paused")
        #expect(paused.json["resumable"] as? Bool == true)
        let kept = try #require(paused.json["bytesWritten"] as? Int)
        #expect(kept == 1 << 20)

        let resumed = try await client.ask(origin.url)
        #expect(resumed.status == 202)
        #expect(resumed.string("id") == id)
        let done = try await service.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        let last = try #require(origin.requests(path: origin.path).last)
        #expect(last.header("range") == "bytes=\(kept)-")
        #expect(last.header("if-range") == origin.etag())
        let file = try await client.request("GET", "/downloads/\(id)/file")
        #expect(file.body == origin.expectedBody())
        #expect(try await service.stop() == 0)
    }

    @Test func progressStreamFraming() async throws {
        // Held at 1 MiB for 5 s (the stream opens mid-transfer), then dropped: a resume follows.
        let origin = try Self.originStallingAtOneMiB(bodySize: 2 << 20, seconds: 5)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback)
        let client = service.client
        let created = try await client.ask(origin.url)
        let id = try #require(created.string("id"))

        let (head, stream) = try await client.openStream("/downloads/\(id)/progress")
        defer { stream.close() }
        #expect(head.status == 200)
        #expect(head.header("Content-Type")?.hasPrefix("text/event-stream") == true)
        #expect(head.header("Cache-Control") == "no-cache")
        var events: [EventStream.Event] = []
        while let event = try await stream.next() { events.append(event) }
        let first = try #require(events.first)
        #expect(first.event == "progress" && first.retry == "2000")
        let ids = events.compactMap { $0.id.flatMap(UInt64.init) }
        #expect(ids.count == events.count && ids == ids.sorted() && Set(ids).count == ids.count)
        #expect(events.last?.event == "completed")
        let resume = try #require(events.first { $0.event == "resumed" && $0.json["offset"] as? Int == 1 << 20 })
        #expect(resume.json["restarted"] as? Bool == false)
        #expect(Set(events.compactMap(\.event)).isSubset(of: ["progress", "resumed", "paused", "completed", "failed"]))
        #expect(events.allSatisfy { $0.json["id"] as? String == id })

        // An ended download: one completed event, then the end. Ids continue after Last-Event-ID.
        let (_, again) = try await client.openStream("/downloads/\(id)/progress", headers: ["Last-Event-ID": "41"])
        defer { again.close() }
        let replay = try await again.next()
        #expect(replay?.event == "completed" && replay?.id == "42")
        #expect(try await again.next() == nil)
        #expect(try await service.stop() == 0)
    }

    @Test func errorAnswers() async throws {
        let service = try await ServiceProcess.start()
        let client = service.client
        let cases: [(String, String, String?, Int, String)] = [
            ("POST", "/downloads", "{not json", 400, "malformed_json"),
            ("POST", "/downloads", "{}", 400, "missing_url"),
            ("POST", "/downloads", #"{"url":42}"#, 400, "invalid_url"),
            ("POST", "/downloads", #"{"url":"ftp://example.com/x"}"#, 400, "invalid_url"),
            ("POST", "/downloads", #"{"url":"example.com/x"}"#, 400, "invalid_url"),
            ("POST", "/downloads", #"{"url":"http://user:pw@example.com/x"}"#, 400, "url_credentials"),
            ("POST", "/downloads", #"{"url":"http://169.254.169.254/latest/meta-data/"}"#, 403, "destination_forbidden"),
            ("POST", "/downloads", #"{"url":"http://example.com/x","storage":"forever"}"#, 400, "invalid_storage"),
            ("GET", "/downloads?state=sleeping", nil, 400, "invalid_state"),
            ("GET", "/downloads/nope", nil, 404, "not_found"),
            ("DELETE", "/downloads/nope", nil, 404, "not_found"),
            ("GET", "/downloads/nope/file", nil, 404, "not_found"),
            ("GET", "/downloads/nope/progress", nil, 404, "not_found"),
            ("GET", "/elsewhere", nil, 404, "not_found"),
            ("PUT", "/downloads", "{}", 405, "method_not_allowed"),
            ("DELETE", "/healthz", nil, 405, "method_not_allowed"),
        ]
        for (method, path, body, status, code) in cases {
            let reply = try await client.request(method, path, headers: body == nil ? [:] : ["Content-Type": "application/json"],
                                                 body: Array((body ?? "").utf8))
            #expect(reply.status == status, "\(method) \(path)")
            #expect((reply.json["error"] as? [String: Any])?["code"] as? String == code, "\(method) \(path): \(reply.text)")
            #expect(reply.header("Content-Type") == "application/json")
        }
        let notAllowed = try await client.request("PUT", "/downloads")
        #expect(notAllowed.header("Allow") == "GET, HEAD, POST")

        // Without --allow-private-networks a loopback origin is refused: at once (403) when the URL
        // names the address, at connect time (the download fails so) when a name resolves to it.
        let origin = try TestOrigin(bodySize: 1024)
        defer { origin.stop() }
        let literal = try await client.ask(origin.url)
        #expect(literal.status == 403)
        #expect((literal.json["error"] as? [String: Any])?["code"] as? String == "destination_forbidden")
        #expect((literal.json["error"] as? [String: Any])?["message"] as? String == "127.0.0.1 is loopback")
        let blocked = try await client.ask("http://localhost:\(origin.port)/file")
        let id = try #require(blocked.string("id"))
        let end = try await service.waitForEnd(id: id)
        #expect(end["state"] as? String == "failed")
        #expect((end["error"] as? [String: Any])?["code"] as? String == "destination_forbidden")
        #expect(origin.getCount() == 0)
        let stillNotThere = try await client.request("GET", "/downloads/\(id)/file")
        #expect(stillNotThere.status == 409)
        #expect(try await service.stop() == 0)
    }

    @Test func bearerAuthGuardsEverythingButHealth() async throws {
        let service = try await ServiceProcess.start(arguments: ["--auth-token", "tok-123"])
        let client = service.client
        #expect(try await client.request("GET", "/healthz").status == 200)
        let missing = try await client.request("GET", "/downloads")
        #expect(missing.status == 401 && missing.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        #expect((missing.json["error"] as? [String: Any])?["code"] as? String == "unauthorized")
        // A wrong token is refused, not asked for again: 403 with no challenge.
        for (path, token) in [("/downloads", "tok-12"), ("/metrics", "nope"), ("/downloads/abc", "tok-1234")] {
            let wrong = try await client.request("GET", path, headers: ["Authorization": "Bearer \(token)"])
            #expect(wrong.status == 403 && wrong.header("WWW-Authenticate") == nil, "\(path)")
            #expect((wrong.json["error"] as? [String: Any])?["code"] as? String == "forbidden", "\(path)")
        }
        #expect(try await client.request("GET", "/downloads", headers: ["Authorization": "Bearer tok-123"]).status == 200)

        let open = try await ServiceProcess.start()
        #expect(try await open.client.request("GET", "/downloads").status == 200)
        #expect(try await service.stop() == 0)
        #expect(try await open.stop() == 0)
    }

    @Test func pausedDownloadSurvivesARestart() async throws {
        let origin = try Self.originStallingAtOneMiB()
        defer { origin.stop() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-restart-\(UUID().uuidString)")
        let first = try await ServiceProcess.start(root: root, arguments: Self.allowLoopback)
        let created = try await first.client.ask(origin.url)
        let id = try #require(created.string("id"))
        try await Self.waitForTheStall(first, id: id)
        let paused = try await Self.cancel(first, created)
        let kept = try #require(paused.json["bytesWritten"] as? Int)
        #expect(paused.string("state") == "paused" && kept == 1 << 20)
        #expect(try await first.stop() == 0)

        let second = try await ServiceProcess.start(root: root, arguments: Self.allowLoopback)
        let listed = try await second.client.request("GET", "/downloads/\(id)")
        #expect(listed.string("state") == "paused")
        #expect(listed.json["bytesWritten"] as? Int == kept)
        let resumed = try await second.client.ask(origin.url)
        #expect(resumed.string("id") == id)
        let done = try await second.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        #expect(origin.requests(path: origin.path).last?.header("range") == "bytes=\(kept)-")
        #expect(try await second.client.request("GET", "/downloads/\(id)/file").body == origin.expectedBody())
        #expect(try await second.stop() == 0)
    }

    @Test func aRunningDownloadCarriesOnAfterACrash() async throws {
        // The engine makes kept bytes durable (fdatasync, then journal) every 4 MiB or 1 s by
        // default, so crash after more than 2 s of transfer: what was checkpointed must not be fetched again.
        // The origin holds the body at 12 MiB, so a test resumed late on a loaded machine still
        // kills a running download (at 2 MiB/s alone, one resumed 4 s late found it completed).
        let origin = try TestOrigin(bodySize: 16 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 2 << 20; $0.stallBound = 25 }
        origin.inject(.stall(afterBodyBytes: 12 << 20))
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-crash-\(UUID().uuidString)")
        let first = try await ServiceProcess.start(root: root, arguments: Self.allowLoopback)
        let created = try await first.client.ask(origin.url)
        let id = try #require(created.string("id"))
        _ = try await first.waitForEvent(id: id, "bytes") { ($0.json["bytesWritten"] as? Int ?? 0) > 8 << 20 }
        #expect(try await first.client.request("GET", "/downloads/\(id)").string("state") == "downloading")
        #expect(try await first.stop(signal: SIGKILL) == SIGKILL)

        origin.update { $0.bytesPerSecond = nil }
        let second = try await ServiceProcess.start(root: root, arguments: Self.allowLoopback)
        let done = try await second.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        #expect(try await second.client.request("GET", "/downloads/\(id)/file").body == origin.expectedBody())
        let resumedAt = origin.requests(path: origin.path).last?.header("range")
        #expect(resumedAt?.hasPrefix("bytes=") == true && resumedAt != "bytes=0-", "resumed with \(resumedAt ?? "no Range")")
        #expect(try await second.stop() == 0)
    }

    @Test func helpAndBadFlags() async throws {
        let executable = try ServiceProcess.executable()
        let (help, bad) = try await onThread { () -> (Int32?, Int32?) in
            func run(_ args: [String]) throws -> Int32? {
                let p = ChildProcess(executable.path, args)
                try p.run()
                p.waitUntilExit(timeout: 30)
                return p.terminationStatus
            }
            return (try run(["--help"]), try run(["--port", "banana"]))
        }
        #expect(help == 0 && bad == 2)
    }
}
