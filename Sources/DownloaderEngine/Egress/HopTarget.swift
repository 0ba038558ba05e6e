import Foundation

/// The host and port a URL points at (the port defaulted from the scheme). Pure.
struct HopTarget: Sendable, Equatable {
    var host: String
    var port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// nil when `url` is not an absolute http(s) URL with a host. A URL the grammar accepts is read
    /// as `URLNormalizer` reads it (`URLScanner`): the host screened is the host fetched (an IDN
    /// host in its punycode form, which Foundation's parser would turn into percent-encoded UTF-8).
    init?(url: String) {
        if let parts = URLScanner.scan(url, allowingCredentials: true) {
            host = EgressRules.normalized(parts.host)
            port = parts.port ?? (parts.scheme == "https" ? 443 : 80)
            return
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https",
              let host = components.percentEncodedHost, !host.isEmpty else { return nil }
        self.host = EgressRules.normalized(host)
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
    }
}
