import Foundation
import Testing

/// The hostile-request corpus and odd request-targets against the real `download-service`
/// executable: every request is refused with a JSON error, the refused connections close, nothing
/// is fetched on a caller's absolute-form say-so, and the process keeps serving and exits cleanly.
@Suite("Hostile requests against the executable", .timeLimit(.minutes(2)))
struct ServiceHostileRequestTests {
    @Test func wholeCorpusAtOnceLeavesTheServiceServing() async throws {
        let service = try await ServiceProcess.start()
        // The 408 case waits out the 10 s header timeout; MiniHTTPServer's own suite covers it.
        let cases = HostileRequestCorpus.rejected.filter { $0.status != 408 }
        try await withThrowingTaskGroup(of: (String, Int, Bool, Bool).self) { group in
            for hostile in cases {
                group.addTask {
                    let client = try await RawHTTPClient.connect(port: service.port)
                    defer { client.close() }
                    try? await client.send(hostile.bytes)
                    let response = try await client.readResponse()
                    let isJSONError = (response.json["error"] as? [String: Any])?["code"] is String
                    return (hostile.name, response.status, isJSONError, try await client.readsEndOfStream())
                }
            }
            for try await (name, status, isJSONError, closed) in group {
                #expect(status == cases.first { $0.name == name }?.status, "\(name)")
                #expect(isJSONError && closed, "\(name): JSON error \(isJSONError), closed \(closed)")
            }
        }
        let health = try await service.client.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect(try await service.stop() == 0)
    }

    @Test func oddRequestTargetsAreNotRoutedAndNothingIsFetched() async throws {
        let origin = try TestOrigin(bodySize: 1024)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: ["--allow-private-networks"])
        func answer(_ method: String, _ target: String) async throws -> (status: Int, code: String?) {
            let client = try await RawHTTPClient.connect(port: service.port)
            defer { client.close() }
            try await client.send("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            let response = try await client.readResponse()
            return (response.status, (response.json["error"] as? [String: Any])?["code"] as? String)
        }
        let methods = ["GET", "POST", "CONNECT", "OPTIONS"]
        for target in ["*", "127.0.0.1:\(origin.port)", "//127.0.0.1:\(origin.port)/file", "/downloads/../healthz", "/%2e%2e/healthz"] {
            for method in methods {
                let got = try await answer(method, target)
                #expect(got.status == 404 && got.code == "not_found", "\(method) \(target): \(got)")
            }
        }
        // The absolute form (RFC 9112 §3.2.2) is answered as its path, whatever host it names: the
        // service's own routes, never a fetch of the URL.
        for (target, path) in [(origin.url, URL(string: origin.url)!.path), (origin.url("/downloads"), "/downloads"),
                               ("http://127.0.0.1:\(service.port)/healthz", "/healthz")] {
            for method in methods {
                let (absolute, originForm) = (try await answer(method, target), try await answer(method, path))
                #expect(absolute.status == originForm.status && absolute.code == originForm.code,
                        "\(method) \(target): \(absolute), as \(path): \(originForm)")
            }
        }
        #expect(origin.connectionCount == 0, "the service fetched a caller's request-target")
        #expect(try await service.stop() == 0)
    }

    /// Bodies are read before routing: the executable reads 64 KiB at most (a `POST /downloads`
    /// needs a few), and refuses more before reading it.
    @Test func aBodyOver64KiBIsRefusedBeforeItIsRead() async throws {
        let service = try await ServiceProcess.start()
        let limit = 64 * 1024
        let client = try await RawHTTPClient.connect(port: service.port)
        defer { client.close() }
        try await client.send("POST /downloads HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: \(limit + 1)\r\n\r\n")
        let refused = try await client.readResponse()
        #expect(refused.status == 413 && (refused.json["error"] as? [String: Any])?["code"] as? String == "body_too_large")
        // Within the limit, the body is read and judged: padding is JSON white space.
        let padded = #"{"url":"http://127.0.0.1:1/f"}"# + String(repeating: " ", count: limit - 40)  // Refused by the guard: nothing fetched.
        let judged = try await service.client.post("/downloads", json: padded)
        #expect(judged.status == 403, "\(judged.status) \(judged.text)")
        #expect(try await service.stop() == 0)
    }
}
