import DownloaderEngine
import Foundation
import Testing
@testable import DownloadService

/// How a download's story step becomes a log line: fixed keys, redacted URL, the same keys every
/// time for an event, its level, and its text form.
@Suite struct StoryLineTests {
    static let every: [DownloadStory.Event] = [
        .created(storage: .cache, client: "10.0.0.7", by: .caller),
        .joined(client: nil, by: .reader, state: .downloading, callers: 2),
        .resumed(client: "10.0.0.8", by: .caller, from: .paused, offset: 1024),
        .attemptStarted(attempt: 2, offset: 1024, range: "bytes=1024-", ifRange: "\"v1\""),
        .headReceived(attempt: 2, status: 206, size: 4096, validator: .etag, outcome: .body(offset: 1024, restarted: false)),
        .headReceived(attempt: 3, status: 503, size: nil, validator: .none, outcome: .refused("HTTP 503")),
        .retryScheduled(attempt: 3, trouble: .init(cause: "http_status", message: "HTTP 503", httpStatus: 503), delay: 1.23456,
                        offset: 1024),
        .paused(reason: .readerLeft, keptBytes: 1024),
        .completed(size: 4096, sha256: String(repeating: "a", count: 64), seconds: 2.5, bytesPerSecond: 1638.4, attempts: 3,
                   refetchedBytes: 0),
        .failed(code: .retriesExhausted, message: "gave up after 6 attempts: HTTP 503", httpStatus: 503, attempts: 6),
        .purged(kind: .pausedPartial, reason: .disk, bytes: 1024),
        .moved(storage: .persistent, path: "/data/abc-f.bin"),
        .moveFailed(storage: .persistent, error: "copy_file_range: No space left on device (errno 28)"),
        .recovered(state: .downloading, keptBytes: 1024, callers: 1),
        .stopped(bytesWritten: 2048),
        .connectionsDecided(attempt: 1, connections: 4, aloneBytesPerSecond: 49_876_543.4, probedBytesPerSecond: 99_500_000.6),
    ]

    static func fields(_ event: DownloadStory.Event, url: String = "https://o.example/f.bin") -> [String: Any] {
        StoryLine.render(DownloadStory(id: "0123456789abcdef", url: url, event: event)).fields
    }

    @Test func everyLineHasTheFixedKeys() {
        for event in Self.every {
            let fields = Self.fields(event)
            #expect(fields["id"] as? String == "0123456789abcdef")
            #expect(fields["url"] as? String == "https://o.example/f.bin")
            #expect(fields["event"] as? String != nil)
        }
        let names = Self.every.map { Self.fields($0)["event"] as! String }
        #expect(names == ["created", "joined", "resumed", "attempt_started", "head_received", "head_received",
                          "retry_scheduled", "paused", "completed", "failed", "purged", "moved", "move_failed", "recovered", "stopped",
                          "connections_decided"])
    }

    @Test func theURLNeverShowsCredentials() {
        let fields = Self.fields(.stopped(bytesWritten: 0), url: "https://user:secret@o.example/f.bin?x=1")
        #expect(fields["url"] as? String == "https://***@o.example/f.bin?x=1")
    }

    /// An origin's 60 KiB validator or message is cut at 1 KiB (never inside a character); the URL is not.
    @Test func textFromTheOriginIsCutAt1KiB() {
        let etag = "\"" + String(repeating: "é", count: 30_000) + "\""
        let fields = Self.fields(.attemptStarted(attempt: 2, offset: 5, range: "bytes=5-", ifRange: etag))
        let shown = fields["ifRange"] as? String ?? ""
        #expect(shown.hasPrefix("\"éé") && shown.hasSuffix("… (60002 bytes)") && shown.utf8.count <= 1_024 + 20)
        #expect(fields["range"] as? String == "bytes=5-")
        let long = "https://o.example/" + String(repeating: "a", count: 3_000)
        #expect(Self.fields(.stopped(bytesWritten: 0), url: long)["url"] as? String == long)
    }

    @Test func anEventHasTheSameKeysWhateverItsValues() {
        let accepted = Self.fields(Self.every[4])
        let refused = Self.fields(Self.every[5])
        #expect(Set(accepted.keys) == Set(refused.keys))
        #expect(refused["size"] is NSNull && refused["offset"] is NSNull && refused["refused"] as? String == "HTTP 503")
        #expect(accepted["refused"] is NSNull && accepted["offset"] as? Int64 == 1024 && accepted["accepted"] as? Bool == true)
        #expect(Self.fields(Self.every[1])["client"] is NSNull)
        #expect(Set(Self.fields(Self.every[1]).keys) == Set(Self.fields(.joined(client: "x", by: .caller, state: .queued, callers: 1)).keys))
    }

    @Test func theProbesDecisionNamesItsRates() {
        let fields = Self.fields(.connectionsDecided(attempt: 1, connections: 4, aloneBytesPerSecond: 49_876_543.4,
                                                     probedBytesPerSecond: 99_500_000.6))
        #expect(fields["connections"] as? Int == 4 && fields["attempt"] as? Int == 1)
        #expect(fields["aloneBytesPerSecond"] as? Int64 == 49_876_543 && fields["probedBytesPerSecond"] as? Int64 == 99_500_001)
        let unprobed = Self.fields(.connectionsDecided(attempt: 1, connections: 1, aloneBytesPerSecond: 1e9, probedBytesPerSecond: nil))
        #expect(unprobed["probedBytesPerSecond"] is NSNull && unprobed["aloneBytesPerSecond"] as? Int64 == 1_000_000_000)
    }

    @Test func theFactsOfEachStep() {
        let retry = Self.fields(Self.every[6])
        #expect(retry["delaySeconds"] as? Double == 1.235 && retry["cause"] as? String == "http_status")
        #expect(retry["httpStatus"] as? Int == 503 && retry["attempt"] as? Int == 3)
        let done = Self.fields(Self.every[8])
        #expect(done["bytesPerSecond"] as? Int64 == 1638 && done["durationSeconds"] as? Double == 2.5)
        #expect(done["refetchedBytes"] as? Int64 == 0 && done["attempts"] as? Int == 3)
        let resumed = Self.fields(Self.every[2])
        #expect(resumed["restart"] as? Bool == false && resumed["from"] as? String == "paused")
        #expect(Self.fields(.resumed(client: nil, by: .caller, from: .failed, offset: 0))["restart"] as? Bool == true)
        #expect(Self.fields(Self.every[3])["range"] as? String == "bytes=1024-")
        #expect(Self.fields(Self.every[10])["kind"] as? String == "paused_partial")
    }

    @Test func levelsRetriesWarnFailuresAreErrors() {
        let levels = Self.every.map { StoryLine.render(DownloadStory(id: "i", url: "u", event: $0)).level }
        #expect(levels.filter { $0 == .warning }.count == 2 && levels[6] == .warning && levels[12] == .warning)
        #expect(levels.filter { $0 == .error }.count == 1 && levels[9] == .error)
        #expect(levels.filter { $0 == .info }.count == Self.every.count - 3)
    }

    @Test func jsonLinesParseAndTextLinesLeadWithTheFixedKeys() throws {
        let lines = OriginLock<[String]>([])
        let json = Logger(sink: { line in lines.withLock { $0.append(line) } })
        let text = Logger(sink: { line in lines.withLock { $0.append(line) } }, format: .text)
        let story = DownloadStory(id: "0123456789abcdef", url: "https://o.example/f.bin", event: Self.every[0])
        json.story(story)
        text.story(story)
        let written = lines.withLock { $0 }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: Any])
        #expect(object["event"] as? String == "created" && object["msg"] as? String == "download created")
        #expect(object["level"] as? String == "info" && object["client"] as? String == "10.0.0.7")
        #expect(written[1].hasSuffix(" INFO  download created event=created id=0123456789abcdef url=https://o.example/f.bin by=caller client=10.0.0.7 storage=cache"),
                "\(written[1])")
    }

    @Test func storyLinesRespectTheLevel() {
        let lines = OriginLock<[String]>([])
        let logger = Logger(sink: { line in lines.withLock { $0.append(line) } }, minimumLevel: .warning)
        for event in Self.every { logger.story(DownloadStory(id: "i", url: "u", event: event)) }
        #expect(lines.withLock { $0 }.count == 3, "retry_scheduled, failed, move_failed")
    }

    @Test func textLinesNameTheLevelInFiveColumns() {
        let lines = OriginLock<[String]>([])
        let logger = Logger(sink: { line in lines.withLock { $0.append(line) } }, format: .text)
        logger.story(DownloadStory(id: "i", url: "u", event: Self.every[6]), at: Date(timeIntervalSince1970: 0))
        logger.story(DownloadStory(id: "i", url: "u", event: Self.every[9]), at: Date(timeIntervalSince1970: 0))
        let seen = lines.withLock { $0 }
        #expect(seen.count == 2 && seen[0].hasPrefix("1970-01-01T00:00:00.000Z WARN  download retry scheduled event=retry_scheduled id=i url=u "))
        #expect(seen[1].hasPrefix("1970-01-01T00:00:00.000Z ERROR download failed event=failed id=i url=u "), "\(seen)")
    }
}
