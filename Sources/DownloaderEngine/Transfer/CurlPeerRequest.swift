import CCurl

/// One blocking libcurl exchange with a peer that is not an origin (a webhook receiver, another
/// replica): an easy handle set up the same way for both — `http`/`https` only, no proxy (whatever
/// the environment says), no redirects, no signals, a fresh connection never reused, TLS verified —
/// with the given request header fields (an empty value sends `Name:`, which removes a default of
/// libcurl's) and, for a body, a copy of it. Callers add their own options and callbacks in
/// `configure`, then read what they need from the handle in `inspect` before it is cleaned up.
public enum CurlPeerRequest {
    /// libcurl's process-wide initialisation (idempotent, reference-counted by libcurl).
    static let globalInit: CURLcode = curl_global_init(ccurl_global_all())

    /// What `perform` came to: libcurl's code, its error message (or the code's text), and what
    /// `inspect` read.
    public struct Outcome<Inspected> {
        public let ok: Bool
        public let detail: String
        public let inspected: Inspected
    }

    /// Sets the handle up, runs `configure`, performs the exchange, runs `inspect`; nil when libcurl
    /// could not start.
    public static func perform<Inspected>(url: String, fields: [(name: String, value: String)], body: [UInt8]?,
                                          configure: (UnsafeMutableRawPointer) -> Void,
                                          inspect: (UnsafeMutableRawPointer) -> Inspected) -> Outcome<Inspected>? {
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        guard globalInit == CURLE_OK, let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for field in fields { list = curl_slist_append(list, field.value.isEmpty ? "\(field.name):" : "\(field.name): \(field.value)") }
        _ = ccurl_setopt_string(easy, CURLOPT_URL, url)
        _ = ccurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_setopt_string(easy, CURLOPT_PROXY, "")
        _ = ccurl_setopt_string(easy, CURLOPT_NOPROXY, "")
        for (option, value) in [(CURLOPT_FOLLOWLOCATION, 0), (CURLOPT_NOSIGNAL, 1), (CURLOPT_FRESH_CONNECT, 1), (CURLOPT_FORBID_REUSE, 1),
                                (CURLOPT_SSL_VERIFYPEER, 1), (CURLOPT_SSL_VERIFYHOST, 2)] {
            _ = ccurl_setopt_long(easy, option, value)
        }
        if let body {
            _ = ccurl_setopt_long(easy, CURLOPT_POST, 1)
            _ = ccurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            body.withUnsafeBytes { raw in
                _ = ccurl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS,
                                         UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
            }
        }
        _ = ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
        _ = ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        configure(easy)
        let code = curl_easy_perform(easy)
        let message = String(cString: errorBuffer)
        return Outcome(ok: code == CURLE_OK, detail: message.isEmpty ? String(cString: curl_easy_strerror(code)) : message,
                       inspected: inspect(easy))
    }
}
