import Foundation
import Testing

/// A client that asks again after a `/fetch` failed, or after the stored file went away: it gets
/// the download as it is now, not the answer its previous state gave.
@Suite(.timeLimit(.minutes(2)))
struct FetchRetryLiveTests {
    @Test func aFetchAfterAFailedOneStartsTheDownloadAgain() async throws {
        let origin = try TestOrigin(bodySize: 64 << 10)
        defer { origin.stop() }
        origin.inject(.status(404, retryAfter: nil))
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback)
        let failed = try await FetchLiveTests.fetch(service, origin.url)
        #expect(failed.status == 502)
        let again = try await FetchLiveTests.fetch(service, origin.url)
        #expect(again.status == 200, "\(again.status) \(String(decoding: again.body.prefix(300), as: UTF8.self))")
        #expect(again.body == origin.expectedBody())
        #expect(again.header("X-Download-Id") == failed.header("X-Download-Id"), "the same download, started again")
    }

    @Test func aFetchAfterTheStoredFileVanishedFetchesItAgain() async throws {
        let origin = try TestOrigin(bodySize: 64 << 10)
        defer { origin.stop() }
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback)
        let first = try await FetchLiveTests.fetch(service, origin.url)
        #expect(first.status == 200 && first.body == origin.expectedBody())
        let id = try #require(first.header("X-Download-Id"))
        let snapshot = try await HTTPTestClient(port: service.port).request("GET", "/downloads/\(id)")
        let path = try #require(snapshot.json["path"] as? String)
        try FileManager.default.removeItem(atPath: path)
        let again = try await FetchLiveTests.fetch(service, origin.url)
        #expect(again.status == 200, "\(again.status) \(String(decoding: again.body.prefix(300), as: UTF8.self))")
        #expect(again.body == origin.expectedBody())
        #expect(origin.getCount() == 2)
    }

    /// An HTTP/1.0 client reads a body of unknown size until the connection closes, so an abort
    /// would look like the end of the file: it waits for the verdict instead (a `502`, or the
    /// verified file with its length).
    @Test func anHTTP10ClientOfAChunkedDownloadGetsTheVerdictNotATruncatedBody() async throws {
        let origin = try TestOrigin(bodySize: 256 << 10)
        defer { origin.stop() }
        origin.update {
            $0.chunked = true
            $0.bytesPerSecond = 1 << 20
        }
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback)
        func fetch10(_ query: String) async throws -> RawHTTPResponse {
            let client = try await RawHTTPClient.connect(port: service.port)
            defer { client.close() }
            try await client.send("GET \(FetchLiveTests.path(origin.url))\(query) HTTP/1.0\r\nHost: t\r\n\r\n")
            return try await client.readResponse()
        }
        let wrong = try await fetch10("&sha256=" + String(repeating: "0", count: 64))
        #expect(wrong.status == 502, "\(wrong.status)")
        let error = wrong.json["error"] as? [String: Any]
        #expect(error?["code"] as? String == "checksum_mismatch")
        let right = try await fetch10("")
        #expect(right.status == 200 && right.header("Content-Length") == "\(256 << 10)")
        #expect(right.body == origin.expectedBody())
    }
}
