import CCurl
import Foundation
import Glibc

/// What one try of a delivery came to.
enum WebhookTryResult: Sendable, Equatable {
    /// The receiver answered (any status; 3xx is not followed). `retryAfter`: its header, raw.
    case answered(status: Int, retryAfter: String?)
    /// The SSRF guard refused the host or the address connected to.
    case forbidden(String)
    /// No answer: lookup, connect, TLS or timeout failure.
    case failed(String)
}

/// Sends one HTTP POST and waits for its answer (at most `timeout` seconds). Blocking: called on a
/// delivery worker thread.
protocol WebhookPosting: Sendable {
    func post(url: String, headers: [(String, String)], body: [UInt8], timeout: Double) -> WebhookTryResult
}

/// `WebhookPosting` through a libcurl easy handle per try, with the SSRF guard's rules applied as
/// for downloads: a host refused by name is not even resolved, and the address connected to is
/// judged at connect time. Redirects are not followed; no proxy; TLS always verified, against the
/// system's roots plus the downloads' extra CAs (`--ca-file`: a receiver on the internal CA).
struct CurlWebhookPoster: WebhookPosting {
    let egress: EgressRules
    var trust: TrustedCertificates? = nil
    /// libcurl's process-wide initialisation (idempotent, reference-counted by libcurl).
    private static let globalInit: CURLcode = curl_global_init(ccurl_global_all())

    /// Per-try state the C callbacks reach through their context pointer.
    private final class Context {
        let egress: EgressRules
        let host: HopTarget
        let trust: TrustedCertificates?
        var refused: String?
        /// Addresses the guard let the try connect to (`CurlTransfer.admittedAddresses`).
        var admitted = 0
        var retryAfter: String?
        var answeredBytes = 0

        init(egress: EgressRules, host: HopTarget, trust: TrustedCertificates?) {
            self.egress = egress
            self.host = host
            self.trust = trust
        }
    }

    func post(url: String, headers: [(String, String)], body: [UInt8], timeout: Double) -> WebhookTryResult {
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        guard let target = HopTarget(url: url) else { return .forbidden("the URL's host and port cannot be read") }
        // The SSRF guard by name, before anything is looked up (the rules may have changed since the
        // callback was registered; nothing follows a redirect, so this host is the only one).
        if case .forbidden(let reason) = egress.screen(host: target.host, port: target.port) {
            return .forbidden("destination forbidden: \(reason)")
        }
        guard Self.globalInit == CURLE_OK, let easy = curl_easy_init() else { return .failed("libcurl could not start") }
        defer { curl_easy_cleanup(easy) }
        let context = Context(egress: egress, host: target, trust: trust)
        let pointer = Unmanaged.passUnretained(context).toOpaque()
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for (name, value) in headers + [("Expect", "")] {
            list = curl_slist_append(list, value.isEmpty ? "\(name):" : "\(name): \(value)")
        }
        func long(_ option: CURLoption, _ value: Int) { _ = ccurl_setopt_long(easy, option, value) }
        func text(_ option: CURLoption, _ value: String) { _ = ccurl_setopt_string(easy, option, value) }
        text(CURLOPT_URL, url)
        long(CURLOPT_QUICK_EXIT, 1)  // The try's timeout does not wait for a lookup's thread (`CurlEasyOptions`).
        text(CURLOPT_PROTOCOLS_STR, "http,https")
        text(CURLOPT_PROXY, "")
        text(CURLOPT_NOPROXY, "")
        long(CURLOPT_FOLLOWLOCATION, 0)
        long(CURLOPT_NOSIGNAL, 1)
        long(CURLOPT_TIMEOUT_MS, max(1, Int(timeout * 1000)))
        long(CURLOPT_FRESH_CONNECT, 1)
        long(CURLOPT_FORBID_REUSE, 1)
        long(CURLOPT_SSL_VERIFYPEER, 1)
        long(CURLOPT_SSL_VERIFYHOST, 2)
        long(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        if trust != nil {
            _ = ccurl_setopt_pointer(easy, CURLOPT_SSL_CTX_DATA, pointer)
            _ = ccurl_setopt_ssl_ctx_function(easy) { _, sslContext, raw in
                guard let raw, let sslContext else { return CURLE_OK }
                Unmanaged<Context>.fromOpaque(raw).takeUnretainedValue().trust?.add(to: OpaquePointer(sslContext))
                return CURLE_OK
            }
        }
        long(CURLOPT_POST, 1)
        _ = ccurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
        body.withUnsafeBytes { raw in
            _ = ccurl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
        }
        _ = ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
        _ = ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        // The answer's body is read and dropped.
        _ = ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, pointer)
        _ = ccurl_setopt_write_function(easy) { _, size, count, _ in size * count }
        _ = ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, pointer)
        _ = ccurl_setopt_header_function(easy) { data, size, count, raw in
            let length = size * count
            guard let raw, let data else { return length }
            let context = Unmanaged<Context>.fromOpaque(raw).takeUnretainedValue()
            context.answeredBytes += length
            guard context.answeredBytes <= 64 * 1024 else { return 0 }
            let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
            if line.hasPrefix("HTTP/") { context.retryAfter = nil }
            if let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "retry-after" {
                context.retryAfter = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
            }
            return length
        }
        // The SSRF guard by address, before each connect.
        _ = ccurl_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, pointer)
        _ = ccurl_setopt_opensocket_function(easy) { raw, _, address in
            guard let raw, let address, let socketAddress = ccurl_sockaddr_address(address) else { return ccurl_socket_bad() }
            let context = Unmanaged<Context>.fromOpaque(raw).takeUnretainedValue()
            guard let ip = IPAddress(socketAddress: socketAddress, length: Int(address.pointee.addrlen)) else {
                context.refused = "an address of family \(address.pointee.family) is not IPv4 or IPv6"
                return ccurl_socket_bad()
            }
            if case .forbidden(let reason) = context.egress.admit(host: context.host.host, port: context.host.port, address: ip) {
                context.refused = reason
                return ccurl_socket_bad()
            }
            context.admitted += 1
            let fd = socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
            return fd >= 0 ? fd : ccurl_socket_bad()
        }
        let code = IDNLocale.reading { curl_easy_perform(easy) }
        if let refused = CurlFailureMapping.refusal(code, refused: context.refused, admitted: context.admitted) {
            return .forbidden("destination forbidden: \(refused)")
        }
        guard code == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            return .failed(detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)
        }
        var status = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return .answered(status: status, retryAfter: context.retryAfter)
    }
}
