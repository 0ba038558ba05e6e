import CCurl

/// How a libcurl result code becomes a `TransferFailure` kind. Pure, so a table test covers it.
///
/// Timeouts: the driver sets only CURLOPT_CONNECTTIMEOUT_MS (no overall timeout, no low-speed limit;
/// stalls are the driver's own timer), so CURLE_OPERATION_TIMEDOUT means the connect timed out.
enum CurlFailureMapping {
    /// The failure for `code`; `blockedAddress` is why the SSRF guard refused a connection during
    /// this attempt, e.g. "127.0.0.1 is loopback" (a refused connect then surfaces from libcurl as
    /// "couldn't connect").
    /// `redirected`: the attempt followed at least one redirect hop, so an unsupported protocol
    /// means the redirect pointed at a non-http(s) scheme (a final failure, not a flaky connection).
    static func failure(for code: CURLcode, detail: String, blockedAddress: String?,
                        redirected: Bool = false) -> TransferFailure {
        let raw = Int32(bitPattern: code.rawValue)
        let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        if redirected && code == CURLE_UNSUPPORTED_PROTOCOL {
            return TransferFailure(.unsupportedRedirect, "redirected to an unsupported scheme: \(message)", code: raw)
        }
        if let blockedAddress, code == CURLE_COULDNT_CONNECT || code == CURLE_ABORTED_BY_CALLBACK {
            return TransferFailure(.blockedAddress, "destination forbidden: \(blockedAddress)", code: raw)
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
            // Resolve, connect, send/receive, partial file, empty reply, TLS, HTTP/2 framing,
            // malformed replies, unsupported redirect targets: the connection did not deliver.
            return .connection
        }
    }
}
