import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// While the database is down, files already known complete are still served (the one
/// exception to `503 database_unavailable`): a replica remembers the completed downloads it has
/// seen and serves `GET|HEAD /downloads/{id}/file` and `/fetch` of their URL from the shared
/// directory; anything it has not seen is 503. Real service processes, a real PostgreSQL stopped.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct KnownCompletionsLiveTests {
    static func fetchPath(_ url: String) -> String {
        "/fetch?url=" + (url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url)
    }

    static func code(_ answer: RawHTTPResponse) -> String? {
        (answer.json["error"] as? [String: Any])?["code"] as? String
    }

    @Test func filesSeenCompleteAreServedWhileTheDatabaseIsDownAndNothingElseIs() async throws {
        let origin = try TestOrigin(bodySize: 300_000, path: "/known.bin")
        defer { origin.stop() }
        let cluster = try await ReplicaSet.start(count: 2)
        let (a, b) = (cluster[0], cluster[1])
        let posted = try await a.client.ask(origin.url)
        let id = try #require(posted.string("id"))
        #expect(try await a.waitForEnd(id: id)["state"] as? String == "completed")
        // a ran it (and let it go once completed); b reads its file once, from the database's row.
        let released = Date().addingTimeInterval(10)
        while await cluster.holder(seconds: 0) != nil && Date() < released { try await Task.sleep(for: .milliseconds(100)) }
        #expect(await cluster.holder(seconds: 0) == nil, "released (and evicted) once completed")
        let match = BodyMatch(try await b.client.request("GET", "/downloads/\(id)/file").body, origin.expectedBody())
        #expect(match.same, "\(match)")
        let other = origin.baseURL + "/never-fetched.bin"

        try await onThread { cluster.postgres.stop(removing: false) }
        for replica in [a, b] {
            let deadline = Date().addingTimeInterval(15)
            while try await replica.client.request("GET", "/healthz").string("database") != "unreachable" && Date() < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        for (name, replica) in [("a", a), ("b", b)] {
            let file = try await replica.client.request("GET", "/downloads/\(id)/file")
            #expect(file.status == 200 && file.body == origin.expectedBody(), "\(name): \(file.status) \(file.text.prefix(200))")
            #expect(file.header("ETag") != nil)
            let head = try await replica.client.request("HEAD", "/downloads/\(id)/file")
            #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == "300000", "\(name): HEAD \(head.status)")
            let fetched = try await replica.client.request("GET", Self.fetchPath(origin.url))
            #expect(fetched.status == 200 && fetched.body == origin.expectedBody() && fetched.header("X-Download-Id") == id,
                    "\(name): /fetch \(fetched.status) \(fetched.text.prefix(200))")
            let ranged = try await replica.client.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=10-19"])
            #expect(ranged.status == 206 && ranged.body == Array(origin.expectedBody()[10..<20]), "\(name): ranged \(ranged.status)")

            // Expectations the file does not meet are not answered by it (as its GET would refuse
            // them); a malformed digest is a 400 as ever.
            let sha = SHA256Hasher.hex(origin.expectedBody())
            #expect(try await replica.client.request("GET", Self.fetchPath(origin.url) + "&sha256=\(sha)&size=300000").status == 200, "\(name)")
            #expect(try await replica.client.request("GET", Self.fetchPath(origin.url) + "&sha256=zz").status == 400, "\(name)")
            for mismatch in ["&sha256=" + String(repeating: "0", count: 64), "&size=1"] {
                let refused = try await replica.client.request("GET", Self.fetchPath(origin.url) + mismatch)
                #expect(refused.status == 503 && Self.code(refused) == "database_unavailable", "\(name) \(mismatch): \(refused.status)")
            }
            for path in ["/downloads/\(id)", "/downloads/unknown-id/file", Self.fetchPath(other), "/downloads/\(id)/progress"] {
                let refused = try await replica.client.request("GET", path)
                #expect(refused.status == 503 && Self.code(refused) == "database_unavailable" && refused.header("Retry-After") != nil,
                        "\(name) \(path): \(refused.status) \(refused.text.prefix(200))")
            }
        }
        let gets = origin.requests(path: "/known.bin").filter { $0.method == "GET" }
        #expect(gets.count == 1, "served from the shared directory, never fetched again")
        #expect(origin.requests(path: "/never-fetched.bin").isEmpty)

        try await onThread { try cluster.postgres.start() }
        let deadline = Date().addingTimeInterval(15)
        while try await a.client.request("GET", "/readyz").status != 200 && Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let snapshot = try await a.client.request("GET", "/downloads/\(id)")
        #expect(snapshot.status == 200 && snapshot.string("state") == "completed")
        await cluster.stop()
    }
}
