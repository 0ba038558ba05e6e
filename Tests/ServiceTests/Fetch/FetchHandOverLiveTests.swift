import Foundation
import Testing

/// A followed download's bytes reach its readers in batches (`HandOverPacing`), and bytes held back
/// for a batch still reach them soon when the origin goes quiet (the transfer loop's idle look).
@Suite(.timeLimit(.minutes(2)))
struct FetchHandOverLiveTests {
    @Test func bytesHeldForABatchReachTheReaderWhileTheOriginIsQuiet() async throws {
        // Less than a batch after the first piece, then nothing for 30 s (the stall timeout is 20 s):
        // without the idle look those bytes would wait in the transfer's buffer until the stall.
        let sent = 100_000
        let origin = try TestOrigin(bodySize: 1 << 20)
        defer { origin.stop() }
        origin.update { $0.stallBound = 30 }
        origin.inject(.stall(afterBodyBytes: sent))
        let service = try await ServiceProcess.start(arguments: FetchLiveTests.loopback + ["--stall-timeout", "20"])
        let reader = try await FetchLiveTests.open(service, origin.url)
        defer { reader.close() }
        let head = try await reader.readResponseHead()
        #expect(head.status == 200)
        let started = Date()
        let body = try await reader.readExactBody(count: sent)  // the socket's receive timeout bounds it
        let waited = Date().timeIntervalSince(started)
        #expect(body == Array(origin.expectedBody()[..<sent]))
        #expect(waited < 10, "the bytes before the origin went quiet arrived after \(waited) s (not at the 20 s stall)")
    }
}
