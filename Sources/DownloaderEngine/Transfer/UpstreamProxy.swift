import Foundation

/// The upstream proxy every hop goes through unless `--no-proxy` names its host: an `http://` or
/// `https://` proxy URL, optionally with `user:password@` (sent as `Proxy-Authorization: Basic`).
/// Pure. `redacted` is the only form ever shown (logs, errors): the credentials become `***`.
public struct UpstreamProxy: Sendable, Equatable, CustomStringConvertible {
    public enum Scheme: String, Sendable {
        case http, https
    }

    public var scheme: Scheme
    /// The proxy's host as a URL spells it (IPv6 in brackets).
    public var host: String
    public var port: Int
    /// Percent-decoded credentials, when the URL has them.
    var username: String?
    var password: String?

    /// `scheme://host:port`: what libcurl is given as `CURLOPT_PROXY` (credentials go separately).
    var address: String { "\(scheme.rawValue)://\(host):\(port)" }

    /// The URL with its credentials replaced by `***`.
    public var redacted: String {
        username == nil && password == nil ? address : "\(scheme.rawValue)://***@\(host):\(port)"
    }

    public var description: String { redacted }

    /// Parses `http://[user[:password]@]host[:port][/]` (the port defaults to the scheme's: 80, 443).
    public static func parse(_ text: String) -> Result<UpstreamProxy, ProxyConfigurationError> {
        func bad(_ why: String) -> Result<UpstreamProxy, ProxyConfigurationError> {
            // Never echo the text: it may hold a password.
            .failure(ProxyConfigurationError(message: "upstream proxy: \(why)"))
        }
        guard let components = URLComponents(string: text.trimmingCharacters(in: .whitespaces)),
              let rawScheme = components.scheme?.lowercased() else {
            return bad("expected a URL like http://proxy.internal:3128")
        }
        guard let scheme = Scheme(rawValue: rawScheme) else { return bad("the scheme must be http or https") }
        guard let host = components.percentEncodedHost?.lowercased(), !host.isEmpty else { return bad("the URL has no host") }
        guard components.path.isEmpty || components.path == "/", components.percentEncodedQuery == nil,
              components.percentEncodedFragment == nil else {
            return bad("a proxy URL has no path, query or fragment")
        }
        let port = components.port ?? (scheme == .https ? 443 : 80)
        guard (1...65535).contains(port) else { return bad("the port must be 1-65535") }
        let isIPv6 = host.contains(":")
        return .success(UpstreamProxy(scheme: scheme, host: isIPv6 && !host.hasPrefix("[") ? "[\(host)]" : host, port: port,
                                      username: components.user, password: components.password))
    }
}

/// An `--upstream-proxy` or `--no-proxy` value that cannot be used; never holds the credentials.
public struct ProxyConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
