import Foundation
import Testing

/// The security flags through the real `download-service` executable, against the loopback
/// `TestOrigin` only (port 0 everywhere).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SecurityServiceLiveTests {
    private func errorField(_ reply: RawHTTPResponse, _ key: String) -> String? {
        (reply.json["error"] as? [String: Any])?[key] as? String
    }

    @Test func allowListModeFetchesOnlyTheListedOrigin() async throws {
        let origin = try TestOrigin(bodySize: 64 * 1024)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: ["--allow-host", "localhost:\(origin.port)"])
        let client = service.client

        let created = try await client.ask("http://localhost:\(origin.port)/file")
        #expect(created.status == 202)
        let id = try #require(created.string("id"))
        let end = try await service.waitForEnd(id: id)
        #expect(end["state"] as? String == "completed")

        for url in ["http://127.0.0.1:\(origin.port)/file", "http://2130706433:\(origin.port)/file",
                    "http://[::ffff:127.0.0.1]:\(origin.port)/file"] {
            let refused = try await client.ask(url)
            #expect(refused.status == 403, "\(url)")
            #expect(errorField(refused, "code") == "destination_forbidden")
            #expect(errorField(refused, "message")?.hasSuffix("port \(origin.port) is not on the allow list") == true, "\(refused.text)")
        }
        #expect(origin.getCount() == 1)
        #expect(try await service.stop() == 0)
    }

    @Test func aDenyRuleWinsOverAllowPrivateNetworks() async throws {
        let origin = try TestOrigin(bodySize: 1024)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks", "--deny-host", "127.0.0.0/8", "--deny-host", "::1"],
                                                     environment: ["DOWNLOAD_SERVICE_DENY_HOST": "*.blocked.example"])
        let refused = try await service.client.ask(origin.url)
        #expect(refused.status == 403)
        #expect(errorField(refused, "message") == "127.0.0.1 is denied (rule 127.0.0.0/8)")
        let byName = try await service.client.ask("http://a.blocked.example/x")
        #expect(byName.status == 403)
        #expect(errorField(byName, "message") == "a.blocked.example is denied (rule *.blocked.example)")
        // localhost passes the URL check and is refused at connect time, by the same rules (libcurl
        // tries both of its addresses, 127.0.0.1 and ::1: had one been let through, its failed
        // connect would be the network's, tried again).
        let created = try await service.client.ask("http://localhost:\(origin.port)/file")
        let id = try #require(created.string("id"))
        let end = try await service.waitForEnd(id: id)
        let error = try #require(end["error"] as? [String: Any])
        #expect(error["code"] as? String == "destination_forbidden")
        let message = error["message"] as? String ?? ""
        #expect(message.contains("is denied (rule 127.0.0.0/8)") || message.contains("is denied (rule ::1)"), "\(error)")
        #expect(origin.connectionCount == 0)
        #expect(try await service.stop() == 0)
    }

    @Test func urlCredentialsOnlyWhenAllowedAndNeverShown() async throws {
        let origin = try TestOrigin(bodySize: 1024)
        defer { origin.stop() }
        let url = "http://user:s3cret@localhost:\(origin.port)/file"
        let strict = try await ServiceProcess.start(arguments: ["--allow-host", "localhost:\(origin.port)"])
        let refused = try await strict.client.ask(url)
        #expect(refused.status == 400 && errorField(refused, "code") == "url_credentials")
        #expect(try await strict.stop() == 0)

        // Allowed, the URL's credentials are the caller's Authorization header: the download is
        // private to callers that give them, and the password reaches neither a snapshot, nor the
        // log, nor the state database.
        let lenient = try await ServiceProcess.start(arguments: ["--allow-host", "localhost:\(origin.port)", "--allow-url-credentials"])
        let created = try await lenient.client.ask(url)
        #expect(created.status == 202)
        #expect(created.string("url") == "http://localhost:\(origin.port)/file")
        let id = try #require(created.string("id"))
        let token = try #require(created.string("token"))
        #expect(try await lenient.waitForEnd(id: id, token: token)["state"] as? String == "completed")
        let listed = try await lenient.client.request("GET", "/downloads")
        #expect(!listed.text.contains(id), "a private download is not listed")
        #expect(origin.requests(path: "/file").first?.header("authorization") == "Basic dXNlcjpzM2NyZXQ=")
        let plain = try await lenient.client.ask("http://localhost:\(origin.port)/file")
        #expect(plain.status == 202 && plain.string("id") != id, "a caller without the credentials shares nothing")
        // `/fetch` with the same credentials in its URL reads the same private download.
        let encoded = try #require(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let fetched = try await lenient.client.request("GET", "/fetch?url=\(encoded)")
        #expect(fetched.status == 200 && fetched.header("X-Download-Id") == id && fetched.body.count == 1024)
        let shown = try await lenient.client.request("GET", "/downloads/\(id)", headers: ["X-Caller-Token": token])
        #expect(shown.status == 200 && shown.string("id") == id, "\(shown.status)")
        #expect(try await lenient.stop() == 0)
        // Neither the password nor the Authorization header made of it (base64 of user:s3cret).
        let secrets = ["s3cret", "dXNlcjpzM2NyZXQ"]
        #expect(lenient.logLines.contains { $0.contains(id) }, "the log scanned tells of the download")
        for secret in secrets {
            #expect(!lenient.logLines.contains { $0.contains(secret) }, "\(secret) in the log")
            for (name, answer) in [("created", created), ("listed", listed), ("shown", shown), ("plain", plain)] {
                #expect(!answer.text.contains(secret), "\(secret) in the \(name) answer")
            }
        }
        let state = lenient.root.appendingPathComponent("state")
        var rowsRead = false
        for name in try FileManager.default.subpathsOfDirectory(atPath: state.path) {
            guard let bytes = FileManager.default.contents(atPath: state.appendingPathComponent(name).path) else { continue }
            for secret in secrets { #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) is in \(name)") }
            if bytes.range(of: Data("localhost:\(origin.port)/file".utf8)) != nil { rowsRead = true }
        }
        #expect(rowsRead, "the scan read the downloads' rows (their URL is stored)")
    }

    @Test func connectionLimitFlagReachesTheServer() async throws {
        let service = try await ServiceProcess.start(arguments: ["--max-connections", "1"])
        let holder = try await LoopbackExchange.connect(port: service.port)
        #expect(try await holder.get("/healthz").hasPrefix("HTTP/1.1 200"))
        // Beyond the limit only the probes are answered (`/healthz`, `/readyz`): anything else is the 503.
        let refused = try await LoopbackExchange.connect(port: service.port)
        try await refused.send("GET /downloads HTTP/1.1\r\nHost: localhost\r\n\r\n")
        let answer = String(decoding: try await refused.read(), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 503 ") && answer.contains("too_many_connections"), "\(answer)")
        let probe = try await LoopbackExchange.connect(port: service.port)
        try await probe.send("GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(String(decoding: try await probe.read(), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(service.logLines.first { $0.contains(#""msg":"listening""#) }?.contains(#""maxConnections":1"#) == true)
        #expect(try await service.stop() == 0)
    }
}
