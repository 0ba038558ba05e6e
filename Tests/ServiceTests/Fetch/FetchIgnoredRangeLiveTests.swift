import Foundation
import Testing

/// An origin that ignores `Range`, cut mid-body: the resume's `200` under the same strong ETag is
/// the same file, so a reader streaming it goes on to the end (it was aborted as a new version),
/// and nothing says the file changed afterwards (a bare `Range` was answered `409 changed`).
@Suite(.timeLimit(.minutes(2)))
struct FetchIgnoredRangeLiveTests {
    @Test func aReaderStreamsOnAcrossACutOriginThatIgnoresRange() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20)
        defer { origin.stop() }
        origin.update { $0.ignoreRanges = true }
        origin.inject(.cut(afterBodyBytes: 1 << 20))
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback)
        let whole = try await FetchLiveTests.fetch(service, origin.url)
        #expect(whole.status == 200 && whole.body.count == 3 << 20 && whole.body == origin.expectedBody())
        #expect(origin.getCount() == 2)
        #expect(origin.requests().last?.header("Range") == "bytes=\(1 << 20)-")
        let ranged = try await FetchLiveTests.fetch(service, origin.url, headers: ["Range": "bytes=100-199"])
        #expect(ranged.status == 206, "\(ranged.status) \(String(decoding: ranged.body.prefix(200), as: UTF8.self))")
        #expect(ranged.body == Array(origin.expectedBody()[100...199]))
    }
}
