import Foundation
import Testing
@testable import DownloaderEngine

/// Completion webhooks through the real executable, a loopback `TestOrigin` and a loopback `WebhookReceiver`.
@Suite(.timeLimit(.minutes(2)))
struct WebhookServiceLiveTests {
    static let loopback = ["--allow-private-networks", "--log-format", "json"]
    static let secret = "webhook-secret-never-logged"

    static func create(_ service: ServiceProcess, url: String, callback: String) async throws -> RawHTTPResponse {
        try await service.client.post("/downloads", json: #"{"url":"\#(url)","callback":\#(callback)}"#)
    }

    @Test func aSignedDeliveryTheReceiverCanVerify() async throws {
        let origin = try TestOrigin()
        defer { origin.stop() }
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback, environment: ["DOWNLOAD_SERVICE_WEBHOOK_SECRET": Self.secret])
        let hook = receiver.url("/hooks/tok-in-path?sig=query-token")
        let created = try await Self.create(service, url: origin.url, callback: #"{"url":"\#(hook)"}"#)
        #expect(created.status == 202 || created.status == 200)
        let shown = try #require(created.json["callback"] as? [String: Any])
        #expect(shown["url"] as? String == "http://127.0.0.1:\(receiver.port)" && shown["events"] as? [String] == ["completed", "failed"])
        let id = try #require(created.string("id"))

        let request = try #require(try await receiver.waitFor(1).first)
        let body = try #require(request.json)
        let download = try #require(body["download"] as? [String: Any])
        #expect(request.method == "POST" && request.target == "/hooks/tok-in-path?sig=query-token")
        #expect(body["event"] as? String == "completed" && download["id"] as? String == id && download["state"] as? String == "completed")
        #expect(download["sha256"] as? String == SHA256Hasher.hex(origin.expectedBody()))
        #expect(request.headers["x-delivery-id"] == body["deliveryId"] as? String)
        #expect(request.headers["content-type"] == "application/json" && request.headers["user-agent"]?.hasPrefix("download-service/") == true)
        #expect(request.headers["x-signature-256"] == "sha256=" + HMACSHA256.hex(key: Array(Self.secret.utf8), message: request.body))

        let line = try await service.waitForLogLine { $0.contains("webhook delivered") }
        #expect(line?.contains(#""callback":"http:\/\/127.0.0.1:\#(receiver.port)""#) == true || line?.contains(#""callback":"http://127.0.0.1:\#(receiver.port)""#) == true, "\(line ?? "")")
        let metrics = try await service.client.request("GET", "/metrics").bodyText
        #expect(metrics.contains(#"download_service_webhook_deliveries_total{outcome="delivered"} 1"#))
        #expect(metrics.contains("download_service_webhook_tries_total 1"))
        #expect(metrics.contains("download_service_webhook_store_errors_total 0"), "the single process has no cluster database to fail")
        #expect(try await service.stop() == 0)
        let log = service.logLines.joined(separator: "\n")
        for leak in [Self.secret, "tok-in-path", "query-token"] { #expect(!log.contains(leak), "\(leak) in the log") }
    }

    @Test func twoCallersOfOneDownloadEachGetTheirOwn() async throws {
        let origin = try TestOrigin(bodySize: 2 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 4 << 20 }
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback)
        let first = try await Self.create(service, url: origin.url, callback: #"{"url":"\#(receiver.url("/first"))"}"#)
        let second = try await Self.create(service, url: origin.url, callback: #"{"url":"\#(receiver.url("/second"))","events":["completed"]}"#)
        #expect(first.string("id") == second.string("id"))
        let got = try await receiver.waitFor(2)
        #expect(Set(got.map(\.target)) == ["/first", "/second"])
        #expect(Set(got.map { $0.headers["x-delivery-id"] }).count == 2)
        // A caller asking after completion (answered 200) still gets `completed`.
        let third = try await Self.create(service, url: origin.url, callback: #"{"url":"\#(receiver.url("/third"))"}"#)
        #expect(third.status == 200)
        let all = try await receiver.waitFor(3)
        #expect(all.last?.target == "/third" && all.last?.json?["event"] as? String == "completed")
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(receiver.received.count == 3)  // once per registration and event
        #expect(try await service.stop() == 0)
    }

    @Test func aFailedDownloadDeliversFailed() async throws {
        let origin = try TestOrigin()
        defer { origin.stop() }
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let service = try await ServiceProcess.start(arguments: Self.loopback + ["--max-attempts", "1"])
        let created = try await Self.create(service, url: origin.url("/missing"), callback: #"{"url":"\#(receiver.url())","events":["failed"]}"#)
        let id = try #require(created.string("id"))
        let got = try await receiver.waitFor(1)
        let download = got[0].json?["download"] as? [String: Any]
        #expect(got[0].json?["event"] as? String == "failed" && download?["id"] as? String == id && download?["state"] as? String == "failed")
        #expect((download?["error"] as? [String: Any])?["code"] is String)
        #expect(try await service.stop() == 0)
    }

    @Test func anUnreadableSecretFileStopsTheStart() async throws {
        let executable = try ServiceProcess.executable()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-webhook-\(UUID().uuidString)")
        let (status, stderr) = try await onThread { () -> (Int32?, String) in
            let pipe = try ChildPipe()
            let p = ChildProcess(executable.path, ["--port", "0", "--log-format", "json", "--state-dir", root.appendingPathComponent("state").path,
                           "--cache-dir", root.appendingPathComponent("cache").path, "--data-dir", root.appendingPathComponent("data").path,
                           "--webhook-secret-file", root.appendingPathComponent("missing-secret").path],
                                 standardOutput: .null, standardError: .pipe(pipe))
            try p.run()
            let text = pipe.readText(timeout: 30)
            p.waitUntilExit(timeout: 30)
            return (p.terminationStatus, text)
        }
        #expect(status == 1 && stderr.contains("--webhook-secret-file: cannot read") && !stderr.contains("listening"), "\(stderr)")
    }

    @Test func refusedAndMalformedCallbacksCreateNothing() async throws {
        let service = try await ServiceProcess.start(arguments: ["--log-format", "json"])
        let refused = try await Self.create(service, url: "http://downloads.example.com/f", callback: #"{"url":"http://127.0.0.1:9/hook"}"#)
        #expect(refused.status == 403 && refused.bodyText.contains("destination_forbidden"), "\(refused.bodyText)")
        let metadata = try await Self.create(service, url: "http://downloads.example.com/f", callback: #"{"url":"http://169.254.169.254/latest"}"#)
        #expect(metadata.status == 403)
        let malformed = try await Self.create(service, url: "http://downloads.example.com/f", callback: #"{"url":"gopher://h/x"}"#)
        #expect(malformed.status == 400 && malformed.bodyText.contains("invalid_callback"))
        let list = try await service.client.request("GET", "/downloads")
        #expect((list.json["downloads"] as? [Any])?.isEmpty == true, "\(list.bodyText)")
        #expect(try await service.stop() == 0)
    }

    @Test func aPendingDeliverySurvivesSIGKILL() async throws {
        let origin = try TestOrigin()
        defer { origin.stop() }
        // The first try is held unanswered: the service is killed in the middle of it.
        let receiver = try WebhookReceiver(answers: [.init(status: 200, held: true)])
        defer { receiver.stop() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ds-webhook-\(UUID().uuidString)")
        let first = try await ServiceProcess.start(root: root, arguments: Self.loopback)
        let created = try await Self.create(first, url: origin.url, callback: #"{"url":"\#(receiver.url())"}"#)
        #expect(created.status == 202 || created.status == 200)
        let tried = try await receiver.waitFor(1)
        #expect(try await first.stop(signal: SIGKILL) == SIGKILL)
        receiver.release()
        #expect(receiver.received.count == 1)

        let second = try await ServiceProcess.start(root: root, arguments: Self.loopback)
        let got = try await receiver.waitFor(2)
        #expect(got[1].headers["x-delivery-id"] == tried[0].headers["x-delivery-id"] && got[1].body == tried[0].body)
        #expect(try await second.waitForLogLine { $0.contains("webhook delivered") } != nil)
        #expect(try await second.stop() == 0)
        #expect(receiver.received.count == 2)
    }
}
