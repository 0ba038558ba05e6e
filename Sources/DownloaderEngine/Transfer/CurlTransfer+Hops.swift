import Basics
import CCurl

// Redirects the transfer follows itself (with an upstream proxy), one easy handle per hop (loop thread).
extension CurlTransfer {
    /// The current hop answered a redirect: note the next hop's URL and end this hop's handle
    /// (false aborts it; the loop then starts the next hop, see `CurlMultiLoop`). Follows libcurl's
    /// own rules: any 3xx with a Location, resolved against the hop's URL, at most `maxRedirects`,
    /// http and https only.
    func endHopWithRedirect(location: String) -> Bool {
        guard let next = Self.resolve(location, against: hopURL) else {
            // Not the Location itself: it may carry credentials or a signature (the message is
            // logged, stored and shown to callers).
            return abort(TransferFailure(.badResponse, "a redirect to an unusable Location (\(location.utf8.count) bytes)"))
        }
        redirectHops += 1
        guard redirectHops <= request.maxRedirects else {
            return abort(TransferFailure(.tooManyRedirects, "Maximum (\(request.maxRedirects)) redirects followed"))
        }
        let scheme = next.prefix { $0 != ":" }.lowercased()
        guard scheme == "http" || scheme == "https" else {
            return abort(TransferFailure(.unsupportedRedirect, "redirected to an unsupported scheme: \(scheme)"))
        }
        pendingRedirect = next
        deadlines?.headEnded(at: monotonicNanoseconds(), final: false)
        return false
    }

    /// The next vetted address of a tunnelled hop whose tunnel the proxy could not open (it answered
    /// CONNECT with a 5xx: the address refused, or was unreachable, before the connect timeout),
    /// taken from `tunnelFallbacks`; nil when the attempt ends here. Nothing of the origin was
    /// heard, so nothing is lost. An address that stays silent past the connect timeout ends the
    /// attempt (its retry starts with the first address again).
    func tunnelFallback(after code: CURLcode) -> IPAddress? {
        guard code != CURLE_OK, isTunnelled, !tunnelFallbacks.isEmpty, head == nil, abortReason == nil,
              !isCancelled, let easy else { return nil }
        var status = 0
        guard ccurl_getinfo_long(easy, CURLINFO_HTTP_CONNECTCODE, &status) == CURLE_OK, (500..<600).contains(status) else { return nil }
        return tunnelFallbacks.removeFirst()
    }

    /// Whether this transfer follows redirects itself: with a proxy (each hop routed and vetted),
    /// and with caller credentials (sent only to hops of the request URL's origin).
    var followsRedirectsItself: Bool { settings.followsRedirectsItself || !request.credentials.isEmpty }

    /// The hop's connections go through the proxy: the guard's connect-time checks do not apply to
    /// them (they would judge the proxy's address; the origin's was vetted before the tunnel).
    var isTunnelled: Bool {
        if case .tunnel = route { return true }
        return false
    }

    /// `location` resolved against `base` by libcurl's URL parser, with the flags libcurl's own
    /// redirect following uses (a space or a byte above ASCII is percent-encoded: what libcurl
    /// itself would follow); nil when it is not a URL. Other schemes come back as they are, for the
    /// caller to refuse.
    static func resolve(_ location: String, against base: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME)
        guard curl_url_set(handle, CURLUPART_URL, base, flags) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_URL, location, flags | UInt32(CURLU_URLENCODE | CURLU_ALLOW_SPACE)) == CURLUE_OK
        else { return nil }
        var out: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &out, 0) == CURLUE_OK, let out else { return nil }
        defer { curl_free(out) }
        return String(cString: out)
    }
}
