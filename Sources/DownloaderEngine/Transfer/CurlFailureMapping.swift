import CCurl

/// How a libcurl result code becomes a `TransferFailure` kind. Pure, so a table test covers it.
///
/// Timeouts: the driver sets only CURLOPT_CONNECTTIMEOUT_MS (no overall timeout, no low-speed limit;
/// head and stall timeouts are the driver's own timers), so CURLE_OPERATION_TIMEDOUT means the
/// connect phase (name lookup, TCP, TLS, a proxy's CONNECT) timed out.
///
/// TLS: a certificate that does not verify is `.tlsCertificate`; a handshake that ended with a
/// fatal alert (sent or received) other than one reporting the peer's close, or with a peer that
/// does not speak TLS at all ("wrong version number"), is `.tlsHandshake`; a handshake cut by a
/// reset or a close is a transient `.connection` failure like any other.
enum CurlFailureMapping {
    /// What else is known about the attempt when libcurl reports its code.
    struct Context: Equatable {
        /// libcurl's error buffer (may be empty).
        var detail = ""
        /// Why the SSRF guard refused a connection during this attempt, e.g. "127.0.0.1 is loopback"
        /// (a refused connect then surfaces from libcurl as "couldn't connect").
        var blockedAddress: String?
        /// The attempt followed at least one redirect hop, so an unsupported protocol means the
        /// redirect pointed at a non-http(s) scheme (a final failure, not a flaky connection).
        var redirected = false
        /// The host the hop was for (named in TLS messages).
        var host = ""
        /// The first fatal alert of a TLS handshake during the attempt.
        var handshakeAlert: TLSAlert?
        /// The upstream proxy's answer to CONNECT (0: none).
        var proxyStatus = 0
        /// The failing TLS peer was the upstream proxy (named instead of the host), e.g. "proxy.internal".
        var tlsProxyHost: String?
    }

    /// The SSRF guard's refusal (`refused`) that ended a transfer with `code`, if it did: a
    /// callback's abort, or a failed connect when the guard let none of the name's addresses be
    /// tried. After one it let through (`admitted`), libcurl tried that too: the failure is the
    /// network's, tried again, not a refusal for good.
    static func refusal(_ code: CURLcode, refused: String?, admitted: Int) -> String? {
        guard let refused else { return nil }
        return code == CURLE_ABORTED_BY_CALLBACK || (code == CURLE_COULDNT_CONNECT && admitted == 0) ? refused : nil
    }

    /// The failure for `code`.
    static func failure(for code: CURLcode, detail: String, blockedAddress: String?,
                        redirected: Bool = false) -> TransferFailure {
        failure(for: code, Context(detail: detail, blockedAddress: blockedAddress, redirected: redirected))
    }

    static func failure(for code: CURLcode, _ context: Context) -> TransferFailure {
        let raw = Int32(bitPattern: code.rawValue)
        let message = context.detail.isEmpty ? String(cString: curl_easy_strerror(code)) : context.detail
        // libcurl answers a hop that speaks no HTTP (HTTP/0.9: a banner, garbage) with the same
        // code as a scheme it refuses: that one is the network's, as without a redirect.
        if context.redirected && code == CURLE_UNSUPPORTED_PROTOCOL && !context.detail.contains("HTTP/0.9") {
            return TransferFailure(.unsupportedRedirect, "redirected to an unsupported scheme: \(message)", code: raw)
        }
        if let blocked = context.blockedAddress, code == CURLE_COULDNT_CONNECT || code == CURLE_ABORTED_BY_CALLBACK {
            return TransferFailure(.blockedAddress, "destination forbidden: \(blocked)", code: raw)
        }
        if context.proxyStatus == 407 {
            return TransferFailure(.proxyAuth, "the upstream proxy wants credentials (HTTP 407): \(message)", code: raw)
        }
        if (400..<500).contains(context.proxyStatus) && context.proxyStatus != 408 && context.proxyStatus != 429 {
            // Squid's default configuration allows CONNECT to port 443 only (http origins go through CONNECT too).
            return TransferFailure(.proxyRefused, "the upstream proxy refused the tunnel to \(context.host) "
                                   + "(HTTP \(context.proxyStatus); does it allow CONNECT to this port?): \(message)", code: raw)
        }
        let peer = context.tlsProxyHost.map { "the upstream proxy \($0)" } ?? (context.host.isEmpty ? "the origin" : context.host)
        if let alert = context.handshakeAlert, alert.afterHandshake, alert.refusesClient {
            // TLS 1.3 ends the handshake before the server judges the client: its refusal comes as
            // the answer to the request (a failed read), not as a handshake error.
            return TransferFailure(.tlsHandshake, "the TLS server \(peer) refused this client (fatal alert '\(alert.description)' "
                                   + "after the handshake; does it require a client certificate?): \(message)", code: raw)
        }
        switch code {
        case CURLE_PEER_FAILED_VERIFICATION:
            return TransferFailure(.tlsCertificate, "the TLS certificate of \(peer) does not verify: \(message)", code: raw)
        case CURLE_SSL_CACERT_BADFILE:
            // This machine's CA bundle is missing or unreadable: every try would fail the same way.
            return TransferFailure(.tlsCertificate, "the system's CA certificates cannot be read, so no certificate "
                                   + "of \(peer) can be verified: \(message)", code: raw)
        case CURLE_SSL_CIPHER:
            return TransferFailure(.tlsHandshake, "the TLS handshake with \(peer) failed: \(message)", code: raw)
        case CURLE_SSL_CONNECT_ERROR:
            // The peer answered, but not in TLS (an https URL on a plain HTTP port): OpenSSL sends no
            // alert for it, and asking again gets the same answer.
            if context.handshakeAlert == nil, message.contains("wrong version number") {
                return TransferFailure(.tlsHandshake, "the TLS handshake with \(peer) failed: it did not answer in TLS "
                                       + "(a plain HTTP port?): \(message)", code: raw)
            }
            guard let alert = context.handshakeAlert, alert.isLasting else { break }
            let who = alert.sent ? "refused by this side" : "refused by \(peer)"
            return TransferFailure(.tlsHandshake, "the TLS handshake with \(peer) failed (fatal alert '\(alert.description)', "
                                   + "\(who)): \(message)", code: raw)
        default:
            break
        }
        return TransferFailure(kind(for: code), message, code: raw)
    }

    static func kind(for code: CURLcode) -> TransferFailure.Kind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .connectTimeout
        case CURLE_TOO_MANY_REDIRECTS:
            return .tooManyRedirects
        case CURLE_FILESIZE_EXCEEDED:
            return .tooLarge
        case CURLE_WRITE_ERROR:
            // Only when a callback aborted without saying why (the driver records why it aborts).
            return .disk
        default:
            // Resolve, connect, send/receive, partial file, empty reply, a TLS handshake cut short,
            // HTTP/2 framing, malformed replies, unsupported redirect targets: the connection did not deliver.
            return .connection
        }
    }
}
