import CCurl
@testable import DownloaderEngine
import Testing

/// libcurl result codes to failure kinds.
@Suite struct CurlFailureMappingTests {
    @Test(arguments: [
        (CURLE_COULDNT_RESOLVE_HOST, TransferFailure.Kind.connection),
        (CURLE_COULDNT_CONNECT, .connection),
        (CURLE_RECV_ERROR, .connection),
        (CURLE_SEND_ERROR, .connection),
        (CURLE_PARTIAL_FILE, .connection),
        (CURLE_GOT_NOTHING, .connection),
        (CURLE_SSL_CONNECT_ERROR, .connection),
        (CURLE_PEER_FAILED_VERIFICATION, .connection),
        (CURLE_UNSUPPORTED_PROTOCOL, .connection),
        (CURLE_OPERATION_TIMEDOUT, .connectTimeout),
        (CURLE_TOO_MANY_REDIRECTS, .tooManyRedirects),
        (CURLE_FILESIZE_EXCEEDED, .tooLarge),
    ])
    func kinds(code: CURLcode, expected: TransferFailure.Kind) {
        let failure = CurlFailureMapping.failure(for: code, detail: "", blockedAddress: nil)
        #expect(failure.kind == expected)
        #expect(failure.code == Int32(code.rawValue))
        #expect(!failure.message.isEmpty)
    }

    @Test func aRefusedAddressExplainsAFailedConnect() {
        #expect(CurlFailureMapping.failure(for: CURLE_COULDNT_CONNECT, detail: "x", blockedAddress: "10.0.0.1").kind
            == .blockedAddress)
        #expect(CurlFailureMapping.failure(for: CURLE_RECV_ERROR, detail: "x", blockedAddress: "10.0.0.1").kind
            == .connection)
    }

    @Test func anUnsupportedProtocolAfterARedirectIsFinal() {
        #expect(CurlFailureMapping.failure(for: CURLE_UNSUPPORTED_PROTOCOL, detail: "x", blockedAddress: nil,
                                           redirected: true).kind == .unsupportedRedirect)
        #expect(CurlFailureMapping.failure(for: CURLE_UNSUPPORTED_PROTOCOL, detail: "x", blockedAddress: nil,
                                           redirected: false).kind == .connection)
        #expect(CurlFailureMapping.failure(for: CURLE_RECV_ERROR, detail: "x", blockedAddress: nil,
                                           redirected: true).kind == .connection)
    }
}
