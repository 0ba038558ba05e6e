import Foundation
import Testing

/// The log as its readers use it, through the real executable against a loopback `TestOrigin`:
/// every stderr line parses as JSON, and the lines of one download id tell its whole story, in order.
@Suite(.timeLimit(.minutes(2)))
struct ServiceStoryLiveTests {
    static let quick = ["--allow-private-networks", "--log-format", "json", "--retry-base-delay", "0.01"]

    /// Every line of the service's stderr, parsed (a line that does not parse is recorded).
    static func parsedLog(_ service: ServiceProcess) -> [[String: Any]] {
        service.logLines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("a log line is not a JSON object: \(line)")
                return nil
            }
            return object
        }
    }

    /// The story lines of download `id`, in order (what `grep <id>` finds, less the access log).
    static func story(_ service: ServiceProcess, id: String) -> [[String: Any]] {
        let lines = parsedLog(service).filter { $0["id"] as? String == id }
        for line in lines {
            #expect(line["event"] is String && line["url"] is String, "fixed keys missing: \(line)")
        }
        return lines
    }

    static func names(_ story: [[String: Any]]) -> [String] { story.compactMap { $0["event"] as? String } }

    /// Waits until the log holds the story line `event` of download `id`.
    static func waitForStory(_ service: ServiceProcess, id: String, _ event: String) async throws {
        let line = try await service.waitForLogLine { $0.contains(#""id":"\#(id)""#) && $0.contains(#""event":"\#(event)""#) }
        #expect(line != nil, "no \(event) line for \(id) in the log:\n\(service.logLines.joined(separator: "\n"))")
    }

    @Test func aCompletedDownloadWithACoalescedCallerAndACut() async throws {
        let origin = try ServiceLiveTests.originStallingAtOneMiB()
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.quick)
        let created = try await service.client.ask(origin.url)
        let id = try #require(created.string("id"))
        try await ServiceLiveTests.waitForTheStall(service, id: id)
        let second = try await service.client.ask(origin.url)
        #expect(second.json["coalesced"] as? Bool == true)
        origin.update { $0.stallBound = 0 }  // The origin drops the connection: the download resumes.
        #expect(try await service.waitForEnd(id: id)["state"] as? String == "completed")
        try await Self.waitForStory(service, id: id, "completed")
        #expect(try await service.stop() == 0)

        let story = Self.story(service, id: id)
        #expect(Self.names(story) == ["created", "attempt_started", "head_received", "joined", "retry_scheduled",
                                      "attempt_started", "head_received", "completed", ])
        #expect(story[0]["client"] as? String == "127.0.0.1" && story[0]["storage"] as? String == "cache")
        #expect(story[0]["url"] as? String == origin.url)
        #expect(story[2]["status"] as? Int == 200 && story[2]["size"] as? Int == 4 << 20 && story[2]["validator"] as? String == "etag")
        #expect(story[3]["callers"] as? Int == 2 && story[3]["state"] as? String == "downloading")
        #expect(story[4]["level"] as? String == "warning" && story[4]["offset"] as? Int == 1 << 20, "\(story[4])")
        #expect(story[5]["range"] as? String == "bytes=1048576-" && story[5]["ifRange"] as? String == origin.etag())
        #expect(story[6]["status"] as? Int == 206 && story[6]["offset"] as? Int == 1 << 20)
        let done = story[7]
        #expect(done["size"] as? Int == 4 << 20 && done["attempts"] as? Int == 2 && done["refetchedBytes"] as? Int == 0)
        #expect((done["sha256"] as? String)?.count == 64 && (done["durationSeconds"] as? Double ?? -1) >= 0)
        for line in story {
            let event = line["event"] as? String ?? "?"
            #expect(line["msg"] as? String == "download " + event.replacingOccurrences(of: "_", with: " "))
        }
    }

    @Test func aDownloadThatFailsAfterRetries() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        defer { origin.stop() }
        origin.inject(.status(503, retryAfter: nil), times: 3)
        let service = try await ServiceProcess.start(arguments: Self.quick + ["--max-attempts", "3"])
        let id = try #require(try await service.client.ask(origin.url).string("id"))
        #expect(try await service.waitForEnd(id: id)["state"] as? String == "failed")
        try await Self.waitForStory(service, id: id, "failed")
        #expect(try await service.stop() == 0)

        let story = Self.story(service, id: id)
        let expected: [String] = ["created", "attempt_started", "head_received", "retry_scheduled", "attempt_started", "head_received",
                                  "retry_scheduled", "attempt_started", "head_received", "failed"]
        #expect(Self.names(story) == expected)
        let retries = story.filter { $0["event"] as? String == "retry_scheduled" }
        for retry in retries {
            #expect(retry["level"] as? String == "warning" && retry["cause"] as? String == "http_status")
            #expect(retry["httpStatus"] as? Int == 503)
        }
        #expect(retries.compactMap { $0["attempt"] as? Int } == [1, 2])
        let failed = try #require(story.last)
        #expect(failed["level"] as? String == "error" && failed["code"] as? String == "retries_exhausted")
        #expect(failed["attempts"] as? Int == 3 && failed["httpStatus"] as? Int == 503)
    }

    @Test func aPauseAndAResume() async throws {
        let origin = try ServiceLiveTests.originStallingAtOneMiB()
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: Self.quick)
        let created = try await service.client.ask(origin.url)
        let id = try #require(created.string("id"))
        try await ServiceLiveTests.waitForTheStall(service, id: id)
        #expect(try await ServiceLiveTests.cancel(service, created).status == 200)
        try await Self.waitForStory(service, id: id, "paused")
        #expect(try await service.client.ask(origin.url).string("id") == id)
        #expect(try await service.waitForEnd(id: id)["state"] as? String == "completed")
        try await Self.waitForStory(service, id: id, "completed")
        #expect(try await service.stop() == 0)

        let story = Self.story(service, id: id)
        #expect(Self.names(story) == ["created", "attempt_started", "head_received", "paused", "resumed",
                                      "attempt_started", "head_received", "completed"])
        #expect(story[3]["reason"] as? String == "caller_cancelled" && story[3]["keptBytes"] as? Int == 1 << 20)
        #expect(story[4]["from"] as? String == "paused" && story[4]["offset"] as? Int == 1 << 20 && story[4]["restart"] as? Bool == false)
        #expect(story[5]["attempt"] as? Int == 2 && story[5]["range"] as? String == "bytes=1048576-")
        #expect(story[6]["accepted"] as? Bool == true && story[6]["restarted"] as? Bool == false)
        #expect(story[7]["attempts"] as? Int == 2 && story[7]["refetchedBytes"] as? Int == 0)
    }

    @Test func aReaderWhoseDownloadFails() async throws {
        let origin = try TestOrigin(bodySize: 10_000)
        defer { origin.stop() }
        origin.inject(.status(404, retryAfter: nil))
        let service = try await ServiceProcess.start(arguments: Self.quick)
        let url = origin.url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? origin.url
        let fetched = try await service.client.request("GET", "/fetch?url=" + url)
        #expect(fetched.status == 502)
        let line = try await service.waitForLogLine { $0.contains(#""event":"failed""#) }
        let id = try #require(line.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["id"] as? String)
        #expect(try await service.stop() == 0)

        let story = Self.story(service, id: id)
        #expect(Self.names(story) == ["created", "attempt_started", "head_received", "failed"])
        #expect(story[0]["by"] as? String == "reader" && story[0]["client"] as? String == "127.0.0.1")
        #expect(story[2]["status"] as? Int == 404 && story[2]["accepted"] as? Bool == false && story[2]["refused"] as? String == "HTTP 404")
        #expect(story[3]["code"] as? String == "http_error" && story[3]["httpStatus"] as? Int == 404 && story[3]["attempts"] as? Int == 1)
    }
}
