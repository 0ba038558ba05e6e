import Foundation
import Testing

/// `GET /events` and `GET /` through the real executable: snapshot, live events, `Last-Event-ID`
/// replay, ids that keep increasing across a restart, the watcher cap, and the token in the URL
/// (accepted for the stream, never logged).
@Suite struct EventsLiveTests {
    static let allowLoopback = ["--allow-private-networks"]

    /// Reads events until one matches (bounded by the stream's own read timeout).
    static func next(_ stream: EventStream, _ matches: (EventStream.Event) -> Bool) async throws -> EventStream.Event {
        try #require(try await stream.next(where: matches))
    }

    static func id(_ event: EventStream.Event) throws -> UInt64 { try #require(event.id.flatMap(UInt64.init)) }

    /// `download_service_event_watchers` from `/metrics`, once it equals `expected` (bounded wait: a
    /// closed stream is noticed by the server a little later); the last value read otherwise.
    static func watchers(_ client: HTTPTestClient, auth: [String: String], expected: Int) async throws -> Int? {
        var value: Int?
        for _ in 0..<100 {
            let text = try await client.request("GET", "/metrics", headers: auth).text
            value = text.split(separator: "\n").first { $0.hasPrefix("download_service_event_watchers ") }
                .flatMap { Int($0.split(separator: " ")[1]) }
            if value == expected { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return value
    }

    @Test func snapshotLiveEventsReplayAndIDsAcrossARestart() async throws {
        let origin = try TestOrigin(bodySize: 64 << 10)
        defer { origin.stop() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-events-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        var service = try await ServiceProcess.start(root: root, arguments: Self.allowLoopback)
        let first = try await service.client.ask(origin.url + "?one")
        let firstID = try #require(first.string("id"))
        // Completed before the stream opens: nothing of it follows the snapshot.
        for _ in 0..<200 where try await service.client.request("GET", "/downloads/\(firstID)").string("state") != "completed" {
            try await Task.sleep(for: .milliseconds(50))
        }

        let (head, stream) = try await service.client.openStream("/events")
        #expect(head.status == 200)
        #expect(head.header("Content-Type")?.hasPrefix("text/event-stream") == true)
        let snapshot = try await Self.next(stream) { _ in true }
        #expect(snapshot.event == "snapshot" && snapshot.retry == "2000" && snapshot.json["id"] as? String == firstID)
        let second = try await service.client.ask(origin.url + "?two")
        let secondID = try #require(second.string("id"))
        let created = try await Self.next(stream) { $0.event == "created" }
        #expect(created.json["id"] as? String == secondID)
        let completed = try await Self.next(stream) { $0.event == "completed" && $0.json["id"] as? String == secondID }
        let (snapshotID, createdID, completedID) = (try Self.id(snapshot), try Self.id(created), try Self.id(completed))
        #expect(createdID > snapshotID && completedID > createdID)
        stream.close()

        // Reconnecting after the snapshot event: exactly what followed, no snapshot.
        let (_, replay) = try await service.client.openStream("/events", headers: ["Last-Event-ID": String(snapshotID)])
        let replayed = try await Self.next(replay) { _ in true }
        #expect(replayed.event == "created" && replayed.json["id"] as? String == secondID)
        #expect(try Self.id(replayed) == createdID)
        let replayedEnd = try await Self.next(replay) { $0.event != "progress" && $0.event != "resumed" }
        let replayedEndID = try Self.id(replayedEnd)
        #expect(replayedEnd.event == "completed" && replayedEndID == completedID)
        replay.close()
        let highest = completedID
        #expect(try await service.stop() == 0)

        // After a restart: ids above every earlier one; an old Last-Event-ID gets a fresh snapshot.
        service = try await ServiceProcess.start(root: root, arguments: Self.allowLoopback)
        let (_, after) = try await service.client.openStream("/events", headers: ["Last-Event-ID": String(highest)])
        let fresh = try await Self.next(after) { _ in true }
        #expect(fresh.event == "snapshot")
        #expect(try Self.id(fresh) > highest)
        let next = try await Self.next(after) { _ in true }
        let (freshID, nextID) = (try Self.id(fresh), try Self.id(next))
        #expect(next.event == "snapshot" && nextID > freshID)
        #expect(Set([fresh.json["id"] as? String, next.json["id"] as? String]) == Set([firstID, secondID]))
        after.close()
        #expect(try await service.stop() == 0)
    }

    /// A private download (made with `headers`) is not the watchers' business: neither its snapshot
    /// nor its live events are on the stream, as it is not in `GET /downloads`.
    @Test func privateDownloadsStayOffTheStream() async throws {
        let origin = try TestOrigin(bodySize: 64 << 10)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback)
        let client = service.client
        func post(_ query: String, headers: String? = nil) async throws -> String {
            let extra = headers.map { #","headers":{"X-Api-Key":"\#($0)"}"# } ?? ""
            let answer = try await client.post("/downloads", json: #"{"url":"\#(origin.url)?\#(query)"\#(extra)}"#)
            #expect(answer.status == 202 || answer.status == 200)
            return try #require(answer.string("id"))
        }
        let before = try await post("before", headers: "k-1")
        let (_, stream) = try await client.openStream("/events")
        let during = try await post("during", headers: "k-2")
        let marker = try await post("marker")
        var seen: [String] = []
        _ = try await Self.next(stream) { event in
            if let id = event.json["id"] as? String { seen.append(id) }
            return event.event == "completed" && event.json["id"] as? String == marker
        }
        stream.close()
        #expect(seen.contains(marker))
        #expect(!seen.contains(before) && !seen.contains(during))
        #expect(try await service.stop() == 0)
    }

    /// Callers holding every place do not lock the operator out: the admin token's streams count apart.
    @Test func theOperatorsStreamsCountApart() async throws {
        let (caller, admin) = ("caller-\(UUID().uuidString.prefix(8))", "admin-\(UUID().uuidString.prefix(8))")
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback + ["--auth-token", caller, "--admin-token", admin,
                                                                                      "--max-event-subscribers", "1"])
        let client = service.client
        let (one, a) = try await client.openStream("/events?access_token=\(caller)")
        #expect(one.status == 200)
        #expect(try await client.request("GET", "/events?access_token=\(caller)").status == 503)
        let (operatorHead, b) = try await client.openStream("/events?access_token=\(admin)")
        #expect(operatorHead.status == 200)
        a.close()
        b.close()
        #expect(try await service.stop() == 0)
    }

    @Test func watcherCapTokenInTheURLAndThePage() async throws {
        let secret = "events-secret-\(UUID().uuidString.prefix(8))"
        let service = try await ServiceProcess.start(arguments: Self.allowLoopback + ["--auth-token", secret, "--max-event-subscribers", "2"])
        let client = service.client
        let refused = try await client.request("GET", "/events")
        #expect(refused.status == 401 && refused.header("WWW-Authenticate") != nil)
        #expect(try await client.request("GET", "/events?access_token=wrong").status == 403)
        // The token in the URL is for reads of the stream and files only.
        #expect(try await client.request("GET", "/downloads?access_token=\(secret)").status == 401)
        let (one, a) = try await client.openStream("/events?access_token=\(secret)")
        let (two, b) = try await client.openStream("/events", headers: ["Authorization": "Bearer \(secret)"])
        #expect(one.status == 200 && two.status == 200)
        let auth = ["Authorization": "Bearer \(secret)"]
        #expect(try await Self.watchers(client, auth: auth, expected: 2) == 2)
        let third = try await client.request("GET", "/events?access_token=\(secret)")
        #expect(third.status == 503 && third.json["error"].flatMap { ($0 as? [String: Any])?["code"] as? String } == "too_many_subscribers")
        #expect(try await client.request("HEAD", "/events?access_token=\(secret)").status == 503, "HEAD answers what a GET would")
        a.close()
        // The place is freed once the server notices the client went (bounded wait).
        var reopened = 0
        for _ in 0..<100 where reopened == 0 {
            let (head, c) = try await client.openStream("/events?access_token=\(secret)")
            if head.status == 200 { reopened = 1 }
            c.close()
            if reopened == 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(reopened == 1)
        b.close()
        #expect(try await Self.watchers(client, auth: auth, expected: 0) == 0)

        // The page needs no token and carries a strict policy.
        let page = try await client.request("GET", "/")
        #expect(page.status == 200 && page.header("Content-Type") == "text/html; charset=utf-8")
        let policy = try #require(page.header("Content-Security-Policy"))
        for directive in ["default-src 'none'", "script-src 'sha256-", "style-src 'sha256-", "connect-src 'self'",
                          "img-src 'self' data:", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"] {
            #expect(policy.contains(directive))
        }
        #expect(!policy.contains("unsafe"))
        #expect(page.text.contains("<script>") && !page.text.contains("src=\"http"))
        #expect(try await service.stop() == 0)
        #expect(!service.logLines.joined(separator: "\n").contains(secret))
        #expect(service.logLines.contains { $0.contains("/events") })  // requests are logged, by path alone
    }
}
