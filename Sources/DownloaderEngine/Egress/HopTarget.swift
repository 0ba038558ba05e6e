import Foundation

/// The host and port a URL points at (the port defaulted from the scheme). Pure.
struct HopTarget: Sendable, Equatable {
    var host: String
    var port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// nil when `url` is not an absolute http(s) URL with a host.
    init?(url: String) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https",
              let host = components.percentEncodedHost, !host.isEmpty else { return nil }
        self.host = EgressRules.normalized(host)
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
    }
}
