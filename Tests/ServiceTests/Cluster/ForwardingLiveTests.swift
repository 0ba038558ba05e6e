import DownloaderEngine
import Foundation
import Glibc
import MiniHTTPServer
import Testing
@testable import DownloadService

/// Forwarding between two replicas in this process (single-process mode, separate state): B's
/// placement says every download is with A, so B forwards what acts on a download to A and relays
/// A's answer. Auth is checked on B first and `Authorization` passes on.
@Suite(.timeLimit(.minutes(3)))
struct ForwardingLiveTests {
    static let auth = ["Authorization": "Bearer cluster-secret"]

    static func fetchPath(_ url: String) -> String {
        "/fetch?url=" + (url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url)
    }

    static func throttled(_ bytesPerSecond: Int) -> TestOrigin.Settings {
        var settings = TestOrigin.Settings()
        settings.bytesPerSecond = bytesPerSecond
        return settings
    }

    static func errorCode(_ response: RawHTTPResponse) -> String? {
        (response.json["error"] as? [String: Any])?["code"] as? String
    }

    @Test func callerAndOperatorRequestsOnBActOnA() async throws {
        let origin = try TestOrigin(bodySize: 2 << 20, settings: Self.throttled(100_000))
        defer { origin.stop() }
        let a = try InProcessReplica("a", authToken: "cluster-secret")
        let b = try InProcessReplica("b", authToken: "cluster-secret")
        b.sendEverything(to: a.url)
        try await withTimeout(60) {
            let body = #"{"url":"\#(origin.url)"}"#
            // B checks the credentials itself before anything goes to A.
            #expect(try await b.client.post("/downloads", json: body).status == 401)
            #expect(a.engine.list().isEmpty)
            let created = try await b.client.post("/downloads", json: body, headers: Self.auth)
            #expect(created.status == 202)
            let id = try #require(created.string("id"))
            let token = try #require(created.string("token"))
            #expect(created.header("Location") == "/downloads/\(id)")
            #expect(a.engine.snapshot(id: id) != nil && a.engine.isCaller(token: token, of: id))
            #expect(b.engine.list().isEmpty)
            // GET on B: A's snapshot.
            let shown = try await b.client.request("GET", "/downloads/\(id)", headers: Self.auth)
            #expect(shown.status == 200 && shown.string("id") == id && shown.string("url") == origin.url)
            #expect(shown.header("Content-Type") == "application/json")
            let head = try await b.client.request("HEAD", "/downloads/\(id)", headers: Self.auth)
            #expect(head.status == 200 && head.body.isEmpty && Int(head.header("Content-Length") ?? "") ?? 0 > 0)
            // The operator pauses through B.
            let paused = try await b.client.request("POST", "/admin/downloads/\(id)/pause", headers: Self.auth)
            #expect(paused.status == 200 && paused.string("pausedBy") == "operator")
            #expect(a.engine.snapshot(id: id)?.pausedBy == .operator)
            // The caller's token, withdrawn through B, is withdrawn on A; a second time A's 404 comes back.
            let cancelled = try await b.client.request("DELETE", "/downloads/\(token)", headers: Self.auth)
            #expect(cancelled.status == 200 && cancelled.json["callers"] as? Int == 0)
            #expect(a.engine.snapshot(id: id)?.callers == 0 && !a.engine.isCaller(token: token, of: id))
            let again = try await b.client.request("DELETE", "/downloads/\(token)", headers: Self.auth)
            #expect(again.status == 404 && Self.errorCode(again) == "not_found")
            // The operator removes it through B.
            let removed = try await b.client.request("DELETE", "/admin/downloads/\(id)", headers: Self.auth)
            #expect(removed.status == 200 && removed.string("state") == "removed")
            #expect(a.engine.snapshot(id: id) == nil)
            #expect(try await b.client.request("GET", "/downloads/\(id)", headers: Self.auth).status == 404)
            #expect(b.engine.list().isEmpty)
        }
        await b.stop()
        await a.stop()
    }

    @Test func fetchOnBStreamsAsBytesAsTheyArrive() async throws {
        // About 8 s at the origin: the first bytes reach B's client long before A has them all.
        let origin = try TestOrigin(bodySize: 1_200_000, settings: Self.throttled(150_000))
        defer { origin.stop() }
        let a = try InProcessReplica("a")
        let b = try InProcessReplica("b")
        b.sendEverything(to: a.url)
        try await withTimeout(60) {
            let client = try await RawHTTPClient.connect(port: b.port)
            defer { client.close() }
            try await client.send("GET \(Self.fetchPath(origin.url)) HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            let head = try await client.readResponseHead()
            #expect(head.status == 200 && head.header("Content-Length") == "1200000")
            let id = try #require(head.header("X-Download-Id"))
            let first = try await client.readExactBody(count: 20_000)
            // Relayed while A still receives it: not buffered whole.
            #expect(a.engine.snapshot(id: id).map { $0.state != .completed } == true)
            let rest = try await client.readToEnd()
            let match = BodyMatch(first + rest, origin.expectedBody())
            #expect(match.same, "\(match)")
            #expect(origin.getCount() == 1)
            #expect(b.engine.list().isEmpty)
            #expect(await InProcessReplica.eventually(within: 5) { a.engine.snapshot(id: id)?.state == .completed })
        }
        await b.stop()
        await a.stop()
    }

    /// An HTTP/1.0 client on B of a download of unknown size gets what it gets from the holder
    /// itself (`FetchRetryLiveTests`): the verdict, never a cut that its close-delimited read takes
    /// for the whole file. B asks A in HTTP/1.0 too.
    @Test func anHTTP10ClientOnBGetsTheVerdictNotATruncatedBody() async throws {
        let origin = try TestOrigin(bodySize: 256 << 10)
        defer { origin.stop() }
        origin.update {
            $0.chunked = true
            $0.bytesPerSecond = 128 << 10  // 2 s: well past the stall bound below
        }
        let a = try InProcessReplica("a")
        // The holder sends nothing before the verdict, for longer than the forwarder's stall bound.
        var settings = PeerForwarder.Settings()
        settings.stallTimeout = 0.1
        let b = try InProcessReplica("b", forwarder: PeerForwarder(settings: settings))
        b.sendEverything(to: a.url)
        try await withTimeout(60) {
            func fetch10(_ query: String) async throws -> RawHTTPResponse {
                let client = try await RawHTTPClient.connect(port: b.port)
                defer { client.close() }
                try await client.send("GET \(Self.fetchPath(origin.url))\(query) HTTP/1.0\r\nHost: b\r\n\r\n")
                return try await client.readResponse()
            }
            let wrong = try await fetch10("&sha256=" + String(repeating: "0", count: 64))
            #expect(wrong.status == 502 && Self.errorCode(wrong) == "checksum_mismatch", "\(wrong.status)")
            let right = try await fetch10("")
            #expect(right.status == 200 && right.header("Content-Length") == "\(256 << 10)")
            #expect(right.body == origin.expectedBody())
        }
        await b.stop()
        await a.stop()
    }

    @Test func aClientLeavingBEndsAsReader() async throws {
        let origin = try TestOrigin(bodySize: 4 << 20, settings: Self.throttled(100_000))
        defer { origin.stop() }
        let a = try InProcessReplica("a")
        let b = try InProcessReplica("b")
        b.sendEverything(to: a.url)
        try await withTimeout(60) {
            let client = try await RawHTTPClient.connect(port: b.port)
            try await client.send("GET \(Self.fetchPath(origin.url)) HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            let head = try await client.readResponseHead()
            let id = try #require(head.header("X-Download-Id"))
            _ = try await client.readExactBody(count: 10_000)
            #expect(b.api.forwarding.forwarder.exchanges == 1)
            client.close()
            // A's only reader was B's exchange: it ends, so the download pauses (its last caller left).
            #expect(await InProcessReplica.eventually(within: 10) { a.engine.snapshot(id: id)?.state == .paused })
            #expect(await InProcessReplica.eventually(within: 5) { b.api.forwarding.forwarder.exchanges == 0 })
        }
        await b.stop()
        await a.stop()
    }

    /// An engine that finds the download held elsewhere only when acting (`heldElsewhere`, the holder
    /// changed since the placement was asked) gets the request forwarded to the holder it names.
    @Test func heldElsewhereFromTheEngineForwardsToTheHolderItNames() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let a = try InProcessReplica("a")
        let b = try InProcessReplica("b")  // its placement says here
        try await withTimeout(30) {
            let created = try await a.client.ask(origin.url)
            let id = try #require(created.string("id"))
            let asked = Request(method: "GET", target: "/downloads/\(id)")
            let relayed = await b.api.answer(.heldElsewhere(ownerURL: a.url), asked)
            #expect(relayed.status == 200)
            guard case .bytes(let body) = relayed.body else {
                Issue.record("a buffered answer has its bytes")
                return
            }
            #expect(String(decoding: body, as: UTF8.self).contains(#""id":"\#(id)""#))
            // Any other engine error is answered as always.
            let other = await b.api.answer(.conflict("no"), asked)
            #expect(other.status == 409)
        }
        await b.stop()
        await a.stop()
    }

    @Test func aForwardedRequestIsNeverForwardedAgain() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        let a = try InProcessReplica("a")
        let b = try InProcessReplica("b")
        // Each says the other holds everything: B forwards once, A refuses a second hop.
        a.sendEverything(to: b.url)
        b.sendEverything(to: a.url)
        try await withTimeout(30) {
            let refused = try await b.client.ask(origin.url)  // B asked A three times, 50 ms apart
            #expect(refused.status == 503 && Self.errorCode(refused) == "held_elsewhere")
            #expect(refused.header("Retry-After") == "1")
            #expect(refused.header(ForwardedHeaders.hopRefused) == nil, "the replicas' own marker stays between them")
            let marked = try await b.client.request("GET", "/downloads/abc", headers: [ForwardedHeaders.marker: "http://x"])
            #expect(marked.status == 503 && Self.errorCode(marked) == "held_elsewhere" && marked.header("Retry-After") == "1")
            #expect(a.engine.list().isEmpty && b.engine.list().isEmpty && origin.requests().isEmpty)
        }
        await b.stop()
        await a.stop()
    }

    /// A holder that let the download go refuses the second hop with a marker; the first replica
    /// asks again where the download lives (at most five tries), never for a forwarded request.
    @Test func aRefusedSecondHopIsAskedAgainByTheFirstReplicaOnly() throws {
        let b = try InProcessReplica("b")
        defer { Task { await b.stop() } }
        var refusal = APIError(engineError: .heldElsewhere(ownerURL: "http://a")).response
        refusal.headers[ForwardedHeaders.hopRefused] = "1"
        let direct = Request(method: "POST", target: "/downloads")
        var forwarded = HTTPHeaders()
        forwarded[ForwardedHeaders.marker] = "http://c"
        let relayed = Request(method: "POST", target: "/downloads", headers: forwarded)
        #expect((1...5).map { b.api.askAgainDelay(refusal, direct, tries: $0) }
                == [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400), nil], "five tries in all")
        #expect(b.api.askAgainDelay(refusal, relayed, tries: 1) == nil, "a forwarded request's refusal goes back to its first hop")
        #expect(b.api.askAgainDelay(APIError(engineError: .heldElsewhere(ownerURL: "http://a")).response, direct, tries: 1) == nil,
                "an unreachable holder's 503 is not asked again")
    }

    @Test func anUnreachableHolderIs503HeldElsewhere() async throws {
        // A port bound but not listening (kept bound, so no other test's server gets it): connections are refused.
        let closed = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(closed) }
        #expect(OriginSocket.bindToLoopback(closed, port: 0) == 0)
        let port = try #require(OriginSocket.localPort(closed))
        let b = try InProcessReplica("b")
        b.sendEverything(to: "http://127.0.0.1:\(port)")
        try await withTimeout(30) {
            let asked: [(String, String)] = [
                ("POST", "/downloads"), ("GET", "/downloads/abc"), ("DELETE", "/downloads/tok"),
                ("POST", "/admin/downloads/abc/pause"), ("DELETE", "/admin/downloads/abc"),
                ("GET", Self.fetchPath("http://127.0.0.1:9/x")), ("HEAD", Self.fetchPath("http://127.0.0.1:9/x")),
            ]
            for (method, path) in asked {
                let body = method == "POST" && path == "/downloads" ? Array(#"{"url":"http://127.0.0.1:9/x"}"#.utf8) : []
                let answer = try await b.client.request(method, path, body: body)
                #expect(answer.status == 503, "\(method) \(path)")
                #expect(answer.header("Retry-After") == "1", "\(method) \(path)")
                if method != "HEAD" { #expect(Self.errorCode(answer) == "held_elsewhere", "\(method) \(path)") }
            }
            // Not forwarded: a list, a body that does not parse (its 400 is B's own).
            #expect(try await b.client.request("GET", "/downloads").status == 200)
            #expect(try await b.client.post("/downloads", json: "{").status == 400)
            #expect(b.engine.list().isEmpty)
        }
        await b.stop()
    }

    /// A holder that takes no connection (its accept queue full): the connect timeout bounds the wait.
    @Test func aHolderThatNeverAcceptsIs503AfterTheConnectTimeout() async throws {
        let (port, descriptors) = try OriginSocket.silentListenerWithFullQueue()
        defer { for fd in descriptors { close(fd) } }
        var settings = PeerForwarder.Settings()
        settings.connectTimeout = 0.5
        let b = try InProcessReplica("b", forwarder: PeerForwarder(settings: settings))
        b.sendEverything(to: "http://127.0.0.1:\(port)")
        try await withTimeout(30) {
            let started = Date()
            let answer = try await b.client.request("GET", "/downloads/abc")
            #expect(answer.status == 503 && Self.errorCode(answer) == "held_elsewhere" && answer.header("Retry-After") == "1")
            #expect(Date().timeIntervalSince(started) < 10)
            let message = (answer.json["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(message.contains("could not be asked (") && message.lowercased().contains("timeout"), "says why: \(message)")
        }
        await b.stop()
    }

    /// A holder that ends its body short (length-framed or chunked): the client's response through B
    /// is aborted too, never ended cleanly. The holder is a test origin answering at `/fetch`.
    @Test(arguments: [false, true])
    func aHolderEndingShortAbortsTheClientsResponse(chunked: Bool) async throws {
        var settings = TestOrigin.Settings()
        settings.chunked = chunked
        let holder = try TestOrigin(bodySize: 300_000, path: "/fetch", settings: settings)
        defer { holder.stop() }
        holder.inject(.cut(afterBodyBytes: 100_000))
        let b = try InProcessReplica("b")
        b.sendEverything(to: holder.baseURL)
        try await withTimeout(30) {
            let client = try await RawHTTPClient.connect(port: b.port)
            defer { client.close() }
            try await client.send("GET \(Self.fetchPath("http://127.0.0.1:9/x")) HTTP/1.1\r\nHost: b\r\n"
                                  + "Authorization: Bearer t\r\nRange: bytes=0-\r\nX-Other: no\r\nConnection: close\r\n\r\n")
            let head = try await client.readResponseHead()
            #expect(head.status == 206)  // the holder's answer to the client's Range
            if chunked {
                #expect(head.header("Transfer-Encoding") == "chunked")
                var received = 0
                await #expect(throws: (any Error).self) {
                    while let chunk = try await client.readChunk() { received += chunk.count }
                }
                #expect(received <= 100_000)
            } else {
                #expect(head.header("Content-Length") == "300000")
                await #expect(throws: (any Error).self) { _ = try await client.readExactBody(count: 300_000) }
            }
            // What went to the holder: the fields that matter and the marker, nothing else of the client's.
            let sent = try #require(holder.requests(path: "/fetch").first)
            let names = Set(sent.headers.map { $0.name.lowercased() })
            #expect(names.isSuperset(of: ["authorization", "range", ForwardedHeaders.marker.lowercased()]))
            #expect(!names.contains("x-other"))
        }
        await b.stop()
    }
}
