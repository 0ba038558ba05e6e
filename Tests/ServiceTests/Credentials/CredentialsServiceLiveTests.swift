import Foundation
import Glibc
import Testing
@testable import DownloadService

/// Caller headers through the real `download-service` against loopback `TestOrigin`s (issue 15):
/// the origin sees them, a redirect to another origin does not, the download is private to its
/// callers, and the values appear in no answer, log line, metric or stored byte.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct CredentialsServiceLiveTests {
    static let secret = "Bearer tok-3f9a1c-SECRET"
    static let apiKey = "key-77e2d0-SECRET"

    static func body(url: String, headers: [String: String], extra: String = "") -> String {
        let fields = headers.map { #""\#($0.key)":"\#($0.value)""# }.joined(separator: ",")
        return #"{"url":"\#(url)","headers":{\#(fields)}\#(extra)}"#
    }

    /// Polls the snapshot of `id` (showing `token`) until `done` holds; bounded.
    static func waitFor(_ client: HTTPTestClient, id: String, token: String, timeout: Double = 30,
                        until done: @escaping @Sendable ([String: Any]) -> Bool) async throws -> [String: Any] {
        try await withTimeout(timeout) { () async throws -> RawHTTPResponse in
            while true {
                let reply = try await client.request("GET", "/downloads/\(id)", headers: ["X-Caller-Token": token])
                if reply.status == 200, done(reply.json) { return reply }
                try await Task.sleep(for: .milliseconds(50))
            }
        }.json
    }

    static func ended(_ s: [String: Any]) -> Bool { s["state"] as? String == "completed" || s["state"] as? String == "failed" }

    /// Every file under `root`, recursively, holds none of `needles`.
    static func filesHoldNone(_ root: URL, _ needles: [String]) throws -> [String] {
        var found: [String] = []
        let walker = FileManager.default.enumerator(atPath: root.path)
        while let name = walker?.nextObject() as? String {
            let path = root.appendingPathComponent(name).path
            guard isRegularFile(path), let data = FileManager.default.contents(atPath: path) else { continue }
            for needle in needles where data.range(of: Data(needle.utf8)) != nil { found.append(name) }
        }
        return found
    }

    @Test func privateToItsCallersAndTheValuesAppearNowhere() async throws {
        let origin = try TestOrigin(bodySize: 200_000)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks", "--log-level", "debug"])
        let client = service.client
        let headers = ["Authorization": Self.secret, "X-Api-Key": Self.apiKey]
        let created = try await client.post("/downloads", json: Self.body(url: origin.url, headers: headers))
        #expect(created.status == 202, "\(created.text)")
        let id = try #require(created.string("id"))
        let token = try #require(created.string("token"))
        let done = try await Self.waitFor(client, id: id, token: token, until: Self.ended)
        #expect(done["state"] as? String == "completed")
        let seen = try #require(origin.requests(path: "/file").first)
        #expect(seen.header("authorization") == Self.secret && seen.header("x-api-key") == Self.apiKey)

        // Private: not listed, and 404 without one of its caller tokens.
        let listed = try await client.request("GET", "/downloads")
        #expect(listed.status == 200 && !listed.text.contains(id))
        #expect(try await client.request("GET", "/downloads/\(id)").status == 404)
        #expect(try await client.request("GET", "/downloads/\(id)?token=0123456789abcdef0123456789abcdef").status == 404)
        #expect(try await client.request("GET", "/downloads/\(id)/file").status == 404)
        #expect(try await client.request("GET", "/downloads/\(id)/progress").status == 404)
        #expect(try await client.request("GET", "/downloads/\(id)?token=\(token)").status == 200)
        let file = try await client.request("GET", "/downloads/\(id)/file", headers: ["X-Caller-Token": token])
        #expect(file.status == 200 && file.body == origin.expectedBody())
        let (head, stream) = try await client.openStream("/downloads/\(id)/progress?token=\(token)")
        stream.close()
        #expect(head.status == 200)

        // A caller without the headers, or with others, gets a download of its own.
        let bare = try await client.ask(origin.url)
        let other = try await client.post("/downloads", json: Self.body(url: origin.url, headers: ["Authorization": "Bearer other"]))
        #expect(Set([id, bare.string("id") ?? id, other.string("id") ?? id]).count == 3)
        // The same headers (names in another case) join it.
        let same = try await client.post("/downloads", json: Self.body(url: origin.url, headers: ["authorization": Self.secret,
                                                                                              "x-api-key": Self.apiKey]))
        #expect(same.status == 200 && same.string("id") == id)
        // A refused header is a 400 naming no value.
        let refused = try await client.post("/downloads", json: Self.body(url: origin.url, headers: ["Proxy-Authorization": Self.secret]))
        #expect(refused.status == 400 && (refused.json["error"] as? [String: Any])?["code"] as? String == "invalid_headers")
        let notStrings = try await client.post("/downloads", json: #"{"url":"\#(origin.url)","headers":{"X-A":1}}"#)
        #expect(notStrings.status == 400 && notStrings.text.contains("invalid_headers"))

        let metrics = try await client.request("GET", "/metrics")
        let snapshot = try await client.request("GET", "/downloads/\(id)", headers: ["X-Caller-Token": token])
        let answers = [created, snapshot, listed, bare, other, same, refused, notStrings, metrics].map(\.text).joined()
        #expect(try await service.stop() == 0)
        #expect(!answers.contains("SECRET"), "an answer holds a header value")
        #expect(!service.logLines.contains { $0.contains("SECRET") }, "a log line holds a header value")
        #expect(try Self.filesHoldNone(service.root.appendingPathComponent("state"), [Self.secret, Self.apiKey, "SECRET"]) == [])
    }

    /// The operator (the admin token) sees a private download, in the list, its snapshot and on
    /// `/events`, and may hand out a link to its file; the caller token shared by every caller does not.
    @Test func theOperatorSeesPrivateDownloads() async throws {
        let origin = try TestOrigin(bodySize: 64 << 10)
        defer { origin.stop() }
        let (callerToken, adminToken) = ("caller-\(UUID().uuidString)", "admin-\(UUID().uuidString)")
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks", "--auth-token", callerToken,
                                                                 "--admin-token", adminToken])
        let client = service.client
        let (asCaller, asAdmin) = (["Authorization": "Bearer \(callerToken)"], ["Authorization": "Bearer \(adminToken)"])
        let created = try await client.post("/downloads", json: Self.body(url: origin.url, headers: ["X-Api-Key": Self.apiKey]),
                                            headers: asCaller)
        let id = try #require(created.string("id"))
        #expect(!(try await client.request("GET", "/downloads", headers: asCaller)).text.contains(id))
        #expect(try await client.request("GET", "/downloads/\(id)", headers: asCaller).status == 404)
        #expect((try await client.request("GET", "/downloads", headers: asAdmin)).text.contains(id))
        #expect(try await client.request("GET", "/downloads/\(id)", headers: asAdmin).status == 200)
        let (head, stream) = try await client.openStream("/events?access_token=\(adminToken)")
        #expect(head.status == 200)
        let first = try #require(try await stream.next { _ in true })
        stream.close()
        #expect(first.event == "snapshot" && first.json["id"] as? String == id)
        // The file with the admin token as `?access_token=`: served to the operator only.
        try await withTimeout(20) {
            while try await client.request("GET", "/downloads/\(id)", headers: asAdmin).string("state") != "completed" {
                try await Task.sleep(nanoseconds: 20_000_000)
            }
        }
        #expect(try await client.request("GET", "/downloads/\(id)/file?access_token=\(adminToken)").status == 200)
        #expect(try await client.request("GET", "/downloads/\(id)/file?access_token=\(callerToken)").status == 404)
        // What the page opens instead: `GET /downloads/{id}/file-link` gives one who may read the
        // file a link that opens it without a token (`FileLink`), and only it.
        #expect(try await client.request("GET", "/downloads/\(id)/file-link").status == 401)
        #expect(try await client.request("GET", "/downloads/\(id)/file-link", headers: asCaller).status == 404, "private")
        let minted = try await client.request("GET", "/downloads/\(id)/file-link", headers: asAdmin)
        #expect(minted.status == 200 && minted.header("Cache-Control") == "no-store")
        let link = try #require(minted.string("url"))
        #expect(link.hasPrefix("/downloads/\(id)/file?expires=") && !link.contains(adminToken) && minted.string("expiresAt") != nil)
        let opened = try await client.request("GET", link)
        #expect(opened.status == 200 && opened.body.count == 64 << 10)
        #expect(try await client.request("HEAD", link).status == 200)
        // Another file, or the signature changed: no link, so a token is wanted.
        #expect(try await client.request("GET", link.replacingOccurrences(of: "/\(id)/", with: "/0123456789abcdef/")).status == 401)
        #expect(try await client.request("GET", String(link.dropLast()) + (link.hasSuffix("0") ? "1" : "0")).status == 401)
        // Signed with all a caller knows (the tokens): no link.
        let forged = FileLink(secret: [], tokens: [callerToken, adminToken]).path(id: id, now: Date().timeIntervalSince1970)
        #expect(try await client.request("GET", forged.path).status == 401)
        #expect(try await client.request("GET", forged.path, headers: asCaller).status == 404, "private")
        // A wrong link beside a good token is the token's request.
        #expect(try await client.request("GET", "/downloads/\(id)/file?expires=1&signature=x", headers: asAdmin).status == 200)
        #expect(try await service.stop() == 0)
    }

    @Test func noHeaderCrossesARedirectToAnotherOrigin() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        let elsewhere = try TestOrigin(bodySize: 10_000, path: "/moved")
        defer { origin.stop(); elsewhere.stop() }
        origin.redirect(from: "/away", to: elsewhere.url)
        origin.redirect(from: "/here", to: "/file")
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks"])
        let headers = ["Authorization": Self.secret, "Cookie": "session=\(Self.apiKey)", "X-Api-Key": Self.apiKey]
        for path in ["/away", "/here"] {
            let created = try await service.client.post("/downloads", json: Self.body(url: origin.url(path), headers: headers))
            let id = try #require(created.string("id"), "\(created.text)")
            let done = try await Self.waitFor(service.client, id: id, token: try #require(created.string("token")), until: Self.ended)
            #expect(done["state"] as? String == "completed", "\(path): \(done)")
        }
        // The first hop (same origin as the URL) had them; the hop to another port had none.
        #expect(origin.requests(path: "/away").first?.header("authorization") == Self.secret)
        let moved = try #require(elsewhere.requests(path: "/moved").first)
        #expect(moved.header("authorization") == nil && moved.header("cookie") == nil && moved.header("x-api-key") == nil)
        #expect(!moved.headers.contains { $0.value.contains("SECRET") })
        // A redirect within the origin keeps them.
        let kept = try #require(origin.requests(path: "/file").first)
        #expect(kept.header("authorization") == Self.secret && kept.header("x-api-key") == Self.apiKey)
        #expect(try await service.stop() == 0)
    }

    /// A redirect the service cannot follow fails the download without quoting the Location (it may
    /// carry credentials or a signature, and the message is stored, logged and shown).
    @Test func anUnusableRedirectIsNotQuoted() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        origin.redirect(from: "/bad", to: "http://bob:BadPortPW@127.0.0.1:99999/x?X-Amz-Signature=LOCSIG1")
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks"])
        let created = try await service.client.post("/downloads", json: Self.body(url: origin.url("/bad"), headers: ["X-Api-Key": Self.apiKey]))
        let id = try #require(created.string("id"), "\(created.text)")
        let done = try await Self.waitFor(service.client, id: id, token: try #require(created.string("token")), until: Self.ended)
        #expect(done["state"] as? String == "failed", "\(done)")
        let message = ((done["error"] as? [String: Any])?["message"] as? String) ?? ""
        #expect(message.contains("unusable Location") && !message.contains("BadPortPW") && !message.contains("LOCSIG1"), "\(message)")
        // An answer that breaks HTTP is not asked again (it was retried until retries_exhausted).
        #expect((done["error"] as? [String: Any])?["code"] as? String == "bad_response", "\(done)")
        #expect(origin.requests(path: "/bad").count == 1)
        #expect(try await service.stop() == 0)
        #expect(!service.logLines.contains { $0.contains("BadPortPW") || $0.contains("LOCSIG1") })
    }

    @Test func afterARestartItWaitsForCredentialsAndResumesFromTheKeptBytes() async throws {
        var settings = TestOrigin.Settings()
        settings.bytesPerSecond = 400_000
        let origin = try TestOrigin(bodySize: 4_000_000, settings: settings)
        defer { origin.stop() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-\(UUID().uuidString)")
        let headers = ["Authorization": Self.secret]
        let first = try await ServiceProcess.start(root: root, arguments: ["--allow-private-networks"])
        let created = try await first.client.post("/downloads", json: Self.body(url: origin.url, headers: headers))
        let id = try #require(created.string("id"))
        let token = try #require(created.string("token"))
        _ = try await Self.waitFor(first.client, id: id, token: token) { ($0["bytesWritten"] as? Int ?? 0) > 600_000 }
        #expect(try await first.stop() == 0)

        origin.update { $0.bytesPerSecond = nil }
        let second = try await ServiceProcess.start(root: root, arguments: ["--allow-private-networks"])
        let waiting = try await second.client.request("GET", "/downloads/\(id)", headers: ["X-Caller-Token": token])
        #expect(waiting.status == 200)
        #expect(waiting.string("state") == "paused" && waiting.string("reason") == "credentials_required", "\(waiting.text)")
        let kept = try #require(waiting.json["bytesWritten"] as? Int)
        #expect(kept > 0)
        let getsBefore = origin.getCount()
        let requestsBefore = origin.requests(path: "/file").count

        let again = try await second.client.post("/downloads", json: Self.body(url: origin.url, headers: headers))
        #expect(again.string("id") == id)
        let done = try await Self.waitFor(second.client, id: id, token: token, until: Self.ended)
        #expect(done["state"] as? String == "completed" && done["reason"] == nil)
        let resumed = try #require(origin.requests(path: "/file").last)
        #expect(resumed.header("range") == "bytes=\(kept)-" && resumed.header("if-range") != nil)
        #expect(resumed.header("authorization") == Self.secret)
        // Nothing went out without the headers: after the restart, the resume is the only request.
        #expect(origin.getCount() == getsBefore + 1 && origin.requests(path: "/file").count == requestsBefore + 1,
                "\(origin.requests(path: "/file").dropFirst(requestsBefore).map { $0.header("range") ?? "-" })")
        let file = try await second.client.request("GET", "/downloads/\(id)/file?token=\(token)")
        let match = BodyMatch(file.body, origin.expectedBody())
        #expect(match.same, "\(match)")
        #expect(try await second.stop() == 0)
        for service in [first, second] { #expect(!service.logLines.contains { $0.contains("SECRET") }) }
        #expect(try Self.filesHoldNone(root.appendingPathComponent("state"), ["SECRET"]) == [])
    }

    @Test func reuseBySHA256AndIgnoredQueryParametersThroughTheService() async throws {
        let origin = try TestOrigin(bodySize: 30_000)
        defer { origin.stop() }
        origin.addResource(path: "/other", size: 10)
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks",
                                                                 "--coalesce-ignore-query", "X-Amz-Signature,Expires"])
        let client = service.client
        let signed = origin.url + "?v=1&X-Amz-Signature=sig-AAAA&Expires=99"
        let created = try await client.ask(signed)
        let id = try #require(created.string("id"))
        #expect(created.string("url") == origin.url + "?v=1&X-Amz-Signature=REDACTED&Expires=REDACTED")
        let done = try await service.waitForEnd(id: id)
        let digest = try #require(done["sha256"] as? String)
        let joined = try await client.ask(origin.url + "?v=1&X-Amz-Signature=sig-BBBB&Expires=100")
        #expect(joined.status == 200 && joined.string("id") == id && joined.json["reused"] as? Bool == false)

        let gets = origin.getCount()
        let reused = try await client.post("/downloads", json: #"{"url":"\#(origin.url("/other"))","sha256":"\#(digest.uppercased())"}"#)
        #expect(reused.status == 200 && reused.string("id") == id && reused.json["reused"] as? Bool == true, "\(reused.text)")
        #expect(reused.string("state") == "completed" && reused.string("sha256") == digest)
        #expect(origin.getCount() == gets && origin.requests(path: "/other").isEmpty)
        #expect(try await service.stop() == 0)
        #expect(!service.logLines.contains { $0.contains("sig-AAAA") || $0.contains("sig-BBBB") })
        #expect(service.logLines.contains { $0.contains("X-Amz-Signature=REDACTED") })
    }
}

private func isRegularFile(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
}
