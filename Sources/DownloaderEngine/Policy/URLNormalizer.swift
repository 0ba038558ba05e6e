import Foundation

/// Turns a caller's URL into the coalescing key: scheme and host lower-cased, default port,
/// fragment dropped, empty path made `/`, dot segments resolved. Pure; rejects what the engine must
/// never fetch.
enum URLNormalizer {
    /// Longest URL accepted.
    static let maxLength = 8192

    /// `allowCredentials`: keep `user:password@` (else such URLs fail with `urlCredentials`).
    /// A URL the grammar accepts takes the fast path (`URLScanner`); any other goes through
    /// Foundation's parser, which names what is wrong with it (and gives the same answer for those
    /// the grammar accepts: `URLScannerTests`).
    static func normalize(_ raw: String, allowCredentials: Bool = false) -> Result<String, EngineError> {
        if raw.utf8.count <= maxLength, let parts = URLScanner.scan(raw, allowingCredentials: allowCredentials) {
            return .success(parts.normalized)
        }
        return normalizeWithFoundation(raw, allowCredentials: allowCredentials)
    }

    /// The same with `URLComponents` and the grammar's regular expression.
    static func normalizeWithFoundation(_ raw: String, allowCredentials: Bool = false) -> Result<String, EngineError> {
        guard !raw.isEmpty, raw.utf8.count <= maxLength else {
            return .failure(.invalidURL("the URL is empty or longer than \(maxLength) bytes"))
        }
        guard !raw.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f || $0.value > 0x7e }) else {
            return .failure(.invalidURL("the URL contains spaces, control or non-ASCII characters"))
        }
        guard let components = URLComponents(string: raw) else {
            return .failure(.invalidURL("the URL cannot be parsed"))
        }
        guard let scheme = components.scheme?.lowercased() else {
            return .failure(.invalidURL("the URL is not absolute"))
        }
        guard scheme == "http" || scheme == "https" else {
            return .failure(.invalidURL("only http and https URLs are accepted"))
        }
        let hasCredentials = components.percentEncodedUser != nil || components.percentEncodedPassword != nil
        if hasCredentials && !allowCredentials {
            return .failure(.urlCredentials("credentials in the URL (user:password@) are not accepted"))
        }
        guard let host = components.percentEncodedHost?.lowercased(), !host.isEmpty else {
            return .failure(.invalidURL("the URL has no host"))
        }
        guard URLGrammar.accepts(raw, allowingCredentials: allowCredentials) else {
            return .failure(.invalidURL("the URL must be a host name or IP address, an optional port 1-65535, then a path, query and fragment of URL characters"))
        }
        var out = scheme + "://"
        if hasCredentials {
            out += components.percentEncodedUser ?? ""
            if let password = components.percentEncodedPassword { out += ":" + password }
            out += "@"
        }
        // IPv6 literals come back with or without brackets depending on the parser.
        if host.contains(":") && !host.hasPrefix("[") {
            out += "[" + host + "]"
        } else {
            out += host
        }
        if let port = components.port {
            guard (1...65535).contains(port) else { return .failure(.invalidURL("the port is out of range")) }
            let defaultPort = scheme == "http" ? 80 : 443
            if port != defaultPort { out += ":\(port)" }
        }
        let path = components.percentEncodedPath
        out += URLScanner.withoutDotSegments(path.isEmpty ? "/" : path)
        if let query = components.percentEncodedQuery { out += "?" + query }
        return .success(out)
    }
}
