import Foundation
import Testing

/// `GET /fetch` readers whose clients are behind: they are not woken for every new byte (they read
/// the newest state once their client drained), yet anything that is not "more of the same" still
/// reaches them at once.
@Suite(.timeLimit(.minutes(3)))
struct FetchBehindLiveTests {
    /// The client reads nothing while the first version lands and is replaced: its response holds
    /// ranges of the old version queued for the socket. It must be aborted, never sent bytes of the
    /// rewritten file under the old version's head.
    @Test func aReaderBehindItsClientIsAbortedWhenTheFileChangesNeverSpliced() async throws {
        let origin = try TestOrigin(bodySize: 6 << 20)
        defer { origin.stop() }
        let old = origin.expectedBody()
        let oldETag = origin.etag()
        origin.inject(.changeVersion(afterBodyBytes: 3 << 20))
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback)
        let slow = try await RawHTTPClient.connect(port: service.port, receiveBuffer: 16 << 10)
        defer { slow.close() }
        try await slow.send("GET \(FetchLiveTests.path(origin.url)) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try await slow.readResponseHead()
        #expect(head.header("ETag") == oldETag)
        // The resume that gets the new version (the reader, the only caller, then leaves: it pauses).
        try await origin.waitForGETs(2)
        try await Task.sleep(for: .milliseconds(300))
        let received = try await slow.readToEnd()
        #expect(received.count < 6 << 20, "cut short of Content-Length: \(received.count)")
        #expect(received == Array(old.prefix(received.count)), "only bytes of the version its head named")
    }

    /// A client far behind a download that keeps landing bytes is not taken for a stalled one: it
    /// gets every byte even when reading them takes longer than the stall timeout.
    @Test func aClientBehindForLongerThanTheStallTimeoutStillGetsEveryByte() async throws {
        let origin = try TestOrigin(bodySize: 6 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 3 << 19 }  // ~4 s: still landing while the client sits behind
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback + ["--stall-timeout", "1"])
        let slow = try await RawHTTPClient.connect(port: service.port, receiveBuffer: 16 << 10)
        defer { slow.close() }
        try await slow.send("GET \(FetchLiveTests.path(origin.url)) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try await slow.readResponseHead()
        #expect(head.status == 200)
        try await Task.sleep(for: .milliseconds(2500))
        let body = try await slow.readExactBody(count: 6 << 20)
        #expect(body == origin.expectedBody())
    }

    /// The download completes while the client is far behind: what it has still to read is queued,
    /// nothing is awaited from the download, so the stall timeout must not end the response (with
    /// 1 000 readers of one file, readers finish long after the fetch did).
    @Test func aClientBehindACompletedDownloadForLongerThanTheStallTimeoutStillGetsEveryByte() async throws {
        let origin = try TestOrigin(bodySize: 12 << 20)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback + ["--stall-timeout", "1"])
        let slow = try await RawHTTPClient.connect(port: service.port, receiveBuffer: 16 << 10)
        defer { slow.close() }
        try await slow.send("GET \(FetchLiveTests.path(origin.url)) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try await slow.readResponseHead()
        let id = try #require(head.header("X-Download-Id"))
        let done = try await service.waitForEnd(id: id)
        #expect(done["state"] as? String == "completed")
        try await Task.sleep(for: .milliseconds(2500))
        let body = try await slow.readExactBody(count: 12 << 20)
        #expect(body == origin.expectedBody())
    }
}
