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
}
