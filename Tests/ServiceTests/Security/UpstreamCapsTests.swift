@testable import DownloaderEngine
import Testing

/// Upstream caps beyond the body size: the response-head budget across all redirect hops.
/// (max file size from Content-Length and while streaming, and the redirect count, are covered in
/// `CurlTransferDriverTests`.) The origin is the in-process loopback `TestOrigin`.
@Suite struct UpstreamCapsTests {
    @Test func responseHeadsOfAllHopsShareOneBudget() async throws {
        let origin = try TestOrigin(bodySize: 1000)
        defer { origin.stop() }
        for hop in 1..<8 { origin.redirect(from: "/r\(hop)", to: hop == 7 ? "/file" : "/r\(hop + 1)") }

        let tight = CurlTransferDriver(maxResponseHeaderBytes: 1024)
        defer { tight.shutdown() }
        let refused = TransferRecorder()
        _ = tight.start(.test(origin.url("/r1"), maxRedirects: 10), delegate: refused)
        let outcome = try await refused.outcome()
        guard case .failure(let failure) = outcome else {
            Issue.record("fetched despite the header budget")
            return
        }
        #expect(failure.kind == .headerTooLarge)
        #expect(failure.message == "response heads larger than 1024 bytes")
        #expect(RetryPolicy.classify(failure.kind) == .fail(code: .headerTooLarge))
        #expect(refused.heads.isEmpty)

        // One hop alone fits the same budget; the default budget takes the whole chain.
        let single = TransferRecorder()
        _ = tight.start(.test(origin.url), delegate: single)
        #expect(try await single.outcome().get().bodyBytes == 1000)
        let roomy = CurlTransferDriver()
        defer { roomy.shutdown() }
        let chain = TransferRecorder()
        _ = roomy.start(.test(origin.url("/r1"), maxRedirects: 10), delegate: chain)
        #expect(try await chain.outcome().get().bodyBytes == 1000)
    }

    @Test func theEngineDefaultsAreTheDocumentedCaps() {
        let configuration = EngineConfiguration(root: EngineFixture.root())
        #expect(configuration.maxRedirects == 10)
        #expect(configuration.maxResponseHeaderBytes == 64 * 1024)
        #expect(configuration.allowHosts.isEmpty && configuration.denyHosts.isEmpty)
        #expect(!configuration.allowPrivateNetworks && !configuration.allowURLCredentials)
    }
}
