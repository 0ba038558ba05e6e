import CCurl

/// The host and port a URL points at (the port defaulted from the scheme). Pure (libcurl's URL
/// parser does no I/O).
struct HopTarget: Sendable, Equatable {
    var host: String
    var port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// nil when `url` is not an absolute http(s) URL with a host that can be read; the guard then
    /// refuses the hop. A URL the grammar accepts is read as `URLNormalizer` reads it
    /// (`URLScanner`); any other (a redirect's URL may hold characters the grammar refuses) as
    /// libcurl reads it when it connects, with an IDN host in its punycode form: the host screened
    /// is the host fetched.
    init?(url: String) {
        if let parts = URLScanner.scan(url, allowingCredentials: true) {
            host = EgressRules.normalized(parts.host)
            port = parts.port ?? (parts.scheme == "https" ? 443 : 80)
            return
        }
        guard let (host, port) = Self.readByCurl(url) else { return nil }
        self.host = EgressRules.normalized(host)
        self.port = port
    }

    private static func readByCurl(_ url: String) -> (String, Int)? {
        IDNLocale.reading { readByCurlInThisLocale(url) }
    }

    private static func readByCurlInThisLocale(_ url: String) -> (String, Int)? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK,
              let scheme = part(handle, CURLUPART_SCHEME, 0)?.lowercased(), scheme == "http" || scheme == "https",
              let host = part(handle, CURLUPART_HOST, UInt32(CURLU_PUNYCODE)), !host.isEmpty,
              host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "%") }),
              let port = part(handle, CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT)).flatMap({ Int($0) }),
              (1...65535).contains(port) else { return nil }
        return (host, port)
    }

    private static func part(_ handle: OpaquePointer, _ which: CURLUPart, _ flags: UInt32) -> String? {
        var out: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &out, flags) == CURLUE_OK, let out else { return nil }
        defer { curl_free(out) }
        return String(cString: out)
    }
}
