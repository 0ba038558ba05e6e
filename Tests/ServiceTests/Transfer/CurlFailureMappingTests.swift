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
        (CURLE_PEER_FAILED_VERIFICATION, .tlsCertificate),
        (CURLE_SSL_CIPHER, .tlsHandshake),
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

    /// A name with a refused address and one let through that is down (split-horizon DNS, a ULA
    /// beside a public address): the failed connect is the network's, tried again; only a connect
    /// the guard let nothing through to, or a callback's abort, is its refusal.
    @Test(arguments: [
        (CURLE_COULDNT_CONNECT, "fd00::5 is private", 0, "fd00::5 is private"),
        (CURLE_COULDNT_CONNECT, "fd00::5 is private", 1, nil),
        (CURLE_ABORTED_BY_CALLBACK, "fd00::5 is private", 1, "fd00::5 is private"),
        (CURLE_OPERATION_TIMEDOUT, "fd00::5 is private", 0, nil),
        (CURLE_COULDNT_CONNECT, nil, 0, nil),
    ] as [(CURLcode, String?, Int, String?)])
    func aRefusalCountsOnlyWhenNothingElseWasTried(_ code: CURLcode, _ refused: String?, _ admitted: Int, _ expected: String?) {
        #expect(CurlFailureMapping.refusal(code, refused: refused, admitted: admitted) == expected)
    }

    @Test func anUnsupportedProtocolAfterARedirectIsFinal() {
        #expect(CurlFailureMapping.failure(for: CURLE_UNSUPPORTED_PROTOCOL, detail: "x", blockedAddress: nil,
                                           redirected: true).kind == .unsupportedRedirect)
        #expect(CurlFailureMapping.failure(for: CURLE_UNSUPPORTED_PROTOCOL, detail: "x", blockedAddress: nil,
                                           redirected: false).kind == .connection)
        #expect(CurlFailureMapping.failure(for: CURLE_RECV_ERROR, detail: "x", blockedAddress: nil,
                                           redirected: true).kind == .connection)
        // The same code for a hop that speaks no HTTP (libcurl's own words): the network's, retried.
        #expect(CurlFailureMapping.failure(for: CURLE_UNSUPPORTED_PROTOCOL, detail: "Received HTTP/0.9 when not allowed",
                                           blockedAddress: nil, redirected: true).kind == .connection)
    }

    /// A `Location` is resolved as libcurl's own redirect following does: a space and bytes above
    /// ASCII percent-encoded, escapes kept (a proxy's or a caller's credentials make the engine
    /// follow redirects itself).
    @Test func aLocationResolvesAsLibcurlFollowsIt() {
        #expect(CurlTransfer.resolve("http://h.example/my file.iso", against: "http://o.example/x") == "http://h.example/my%20file.iso")
        #expect(CurlTransfer.resolve("/a b/c%20d", against: "http://o.example/x/y") == "http://o.example/a%20b/c%20d")
        #expect(CurlTransfer.resolve("ftp://h.example/f", against: "http://o.example/x") == "ftp://h.example/f")
    }

    @Test func aHandshakeIsLastingOnlyWithAFatalAlertThatIsNotAClose() {
        func kind(_ alert: TLSAlert?) -> TransferFailure.Kind {
            CurlFailureMapping.failure(for: CURLE_SSL_CONNECT_ERROR,
                                       .init(detail: "x", host: "files.test", handshakeAlert: alert)).kind
        }
        #expect(kind(nil) == .connection)  // A reset during the handshake.
        #expect(kind(TLSAlert(sent: true, description: "decode error", causedByEOF: true)) == .connection)
        #expect(kind(TLSAlert(sent: true, description: "protocol version", causedByEOF: false)) == .tlsHandshake)
        #expect(kind(TLSAlert(sent: false, description: "handshake failure", causedByEOF: false)) == .tlsHandshake)
        // A plain HTTP port behind an https URL: no alert, the same answer every time.
        let plain = CurlFailureMapping.failure(for: CURLE_SSL_CONNECT_ERROR, .init(
            detail: "error:0A00010B:SSL routines::wrong version number", host: "files.test"))
        #expect(plain.kind == .tlsHandshake)
        #expect(plain.message.hasPrefix("the TLS handshake with files.test failed: it did not answer in TLS (a plain HTTP port?)"))
        let failure = CurlFailureMapping.failure(for: CURLE_SSL_CONNECT_ERROR, .init(
            detail: "error:0A00042E:SSL routines::tlsv1 alert protocol version", host: "files.test",
            handshakeAlert: TLSAlert(sent: false, description: "protocol version", causedByEOF: false)))
        #expect(failure.message == "the TLS handshake with files.test failed (fatal alert 'protocol version', refused by files.test): "
                + "error:0A00042E:SSL routines::tlsv1 alert protocol version")
    }

    /// TLS 1.3: a server that wants a client certificate refuses after this side's handshake ended,
    /// so libcurl reports a failed read; the alert received says it is lasting.
    @Test func aServerRefusingThisClientAfterTheHandshakeIsLasting() {
        func failure(_ alert: TLSAlert?) -> TransferFailure {
            CurlFailureMapping.failure(for: CURLE_RECV_ERROR, .init(
                detail: "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required", host: "files.test",
                handshakeAlert: alert))
        }
        let required = failure(TLSAlert(sent: false, description: TLSAlert.describe(116, openSSL: "unknown"), causedByEOF: false,
                                        afterHandshake: true, code: 116))
        #expect(required.kind == .tlsHandshake)
        #expect(required.message.hasPrefix("the TLS server files.test refused this client (fatal alert 'certificate required' after the handshake"))
        #expect(failure(nil).kind == .connection)
        // Another alert after the handshake (a damaged record, say) is no refusal of the client.
        #expect(failure(TLSAlert(sent: false, description: "bad record mac", causedByEOF: false, afterHandshake: true, code: 20)).kind
                == .connection)
    }

    /// A CA bundle this machine cannot read fails at once (no try could verify anything).
    @Test func anUnreadableCABundleIsNoConnectionError() {
        let failure = CurlFailureMapping.failure(for: CURLE_SSL_CACERT_BADFILE, .init(
            detail: "error setting certificate file: /etc/ssl/certs/ca-certificates.crt", host: "files.test"))
        #expect(failure.kind == .tlsCertificate)
        #expect(failure.message.hasPrefix("the system's CA certificates cannot be read, so no certificate of files.test can be verified"))
    }

    @Test func aCertificateNamesTheHostOrTheProxy() {
        let origin = CurlFailureMapping.failure(for: CURLE_PEER_FAILED_VERIFICATION,
                                                .init(detail: "SSL certificate problem: certificate has expired", host: "files.test"))
        #expect(origin.message == "the TLS certificate of files.test does not verify: SSL certificate problem: certificate has expired")
        let proxy = CurlFailureMapping.failure(for: CURLE_PEER_FAILED_VERIFICATION,
                                               .init(detail: "d", host: "files.test", tlsProxyHost: "proxy.test"))
        #expect(proxy.message == "the TLS certificate of the upstream proxy proxy.test does not verify: d")
    }

    @Test func theProxysAnswerToConnect() {
        func kind(_ status: Int) -> TransferFailure.Kind {
            CurlFailureMapping.failure(for: CURLE_RECV_ERROR, .init(detail: "x", host: "h", proxyStatus: status)).kind
        }
        #expect(kind(407) == .proxyAuth)
        #expect(kind(403) == .proxyRefused)
        #expect(CurlFailureMapping.failure(for: CURLE_RECV_ERROR, .init(detail: "x", host: "h", proxyStatus: 403)).message
                == "the upstream proxy refused the tunnel to h (HTTP 403; does it allow CONNECT to this port?): x")
        #expect(kind(0) == .connection)
        #expect(kind(503) == .connection)
        #expect(kind(429) == .connection)
    }
}
