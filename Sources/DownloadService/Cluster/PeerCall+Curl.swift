import CCurl
import Foundation

// The exchange itself: a libcurl easy handle (no proxy, no redirects, HTTP/1.1, TLS verified), its
// callbacks reaching the call through their context pointer.
extension PeerCall {
    /// Performs the exchange (blocking: on the call's own thread).
    func perform() {
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        guard Self.globalInit == CURLE_OK, let easy = curl_easy_init() else {
            finish(ok: false, "libcurl could not start")
            return
        }
        defer { curl_easy_cleanup(easy) }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        // libcurl's own defaults (a form Content-Type on POST, Accept: */*, Expect) never stand in for the client's.
        var sent = fields
        for name in ["Content-Type", "Accept", "Expect"] where !sent.contains(where: { $0.name.lowercased() == name.lowercased() }) {
            sent.append((name: name, value: ""))
        }
        for field in sent { list = curl_slist_append(list, field.value.isEmpty ? "\(field.name):" : "\(field.name): \(field.value)") }
        func long(_ option: CURLoption, _ value: Int) { _ = ccurl_setopt_long(easy, option, value) }
        func text(_ option: CURLoption, _ value: String) { _ = ccurl_setopt_string(easy, option, value) }
        text(CURLOPT_URL, url)
        long(CURLOPT_QUICK_EXIT, 1)  // The call's timeout does not wait for a lookup's thread (`CurlEasyOptions`).
        text(CURLOPT_PROTOCOLS_STR, "http,https")
        text(CURLOPT_PROXY, "")
        text(CURLOPT_NOPROXY, "")
        long(CURLOPT_FOLLOWLOCATION, 0)
        long(CURLOPT_NOSIGNAL, 1)
        long(CURLOPT_PATH_AS_IS, 1)
        long(CURLOPT_HTTP_VERSION, Int(http10 ? CURL_HTTP_VERSION_1_0 : CURL_HTTP_VERSION_1_1))
        long(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(timeouts.connect * 1000)))
        if case .buffered = mode { long(CURLOPT_TIMEOUT_MS, max(1, Int(timeouts.total * 1000))) }
        long(CURLOPT_FORBID_REUSE, 1)
        long(CURLOPT_SSL_VERIFYPEER, 1)
        long(CURLOPT_SSL_VERIFYHOST, 2)
        if method == "HEAD" {
            long(CURLOPT_NOBODY, 1)
        } else if method == "GET" {
            long(CURLOPT_HTTPGET, 1)
        } else {
            if method == "POST" || !body.isEmpty {
                long(CURLOPT_POST, 1)
                _ = ccurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                body.withUnsafeBytes { raw in
                    _ = ccurl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS,
                                             UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
                }
            }
            if method != "POST" { text(CURLOPT_CUSTOMREQUEST, method) }
        }
        _ = ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
        _ = ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
        _ = ccurl_setopt_header_function(easy) { data, size, count, raw in
            guard let raw else { return 0 }
            let call = Unmanaged<PeerCall>.fromOpaque(raw).takeUnretainedValue()
            return call.headerLine(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
        }
        _ = ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = ccurl_setopt_write_function(easy) { data, size, count, raw in
            guard let raw else { return 0 }
            let call = Unmanaged<PeerCall>.fromOpaque(raw).takeUnretainedValue()
            let bytes = Array(UnsafeRawBufferPointer(start: data, count: size * count))
            return call.received(bytes) ? size * count : 0
        }
        long(CURLOPT_NOPROGRESS, 0)
        _ = ccurl_setopt_pointer(easy, CURLOPT_XFERINFODATA, context)
        _ = ccurl_setopt_xferinfo_function(easy) { raw, _, _, _, _ in
            guard let raw else { return 1 }
            return Unmanaged<PeerCall>.fromOpaque(raw).takeUnretainedValue().shouldStop() ? 1 : 0
        }
        let code = curl_easy_perform(easy)
        let detail = String(cString: errorBuffer)
        finish(ok: code == CURLE_OK, detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)
    }
}
