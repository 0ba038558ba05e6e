/// What downloads are coalesced by: the normalised URL without the query parameters the operator
/// chose to ignore (`--coalesce-ignore-query`), plus, for a credentialed download, the keyed hash
/// of its caller's headers (`CredentialKey`). Callers with other headers, or none, never share a
/// key, so they never share bytes. Pure.
struct CoalescingKey: Hashable, Sendable {
    /// The normalised URL, ignored query parameters left out.
    var url: String
    /// HMAC-SHA256 of the caller's canonical headers; nil without headers.
    var credential: [UInt8]?

    init(url: String, ignoring names: Set<String>, credential: [UInt8]?) {
        self.url = names.isEmpty ? url : QueryParameters.filtering(url, keep: { !names.contains(String($0)) }) { _ in nil }
        self.credential = credential
    }
}

/// The query of a normalised URL, parameter by parameter. Pure.
enum QueryParameters {
    /// `url` with each `name=value` (or bare `name`) parameter of its query kept when `keep(name)`,
    /// else replaced by `replace(part)` (nil: dropped). Names are compared as written (query names
    /// are case-sensitive); a URL without a query comes back as it is.
    static func filtering(_ url: String, keep: (Substring) -> Bool, replace: (Substring) -> String?) -> String {
        guard let mark = url.firstIndex(of: "?") else { return url }
        let base = url[..<mark]
        var parts: [String] = []
        for part in url[url.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: false) {
            let name = part.prefix { $0 != "=" }
            if keep(name) {
                parts.append(String(part))
            } else if let replaced = replace(part) {
                parts.append(replaced)
            }
        }
        return parts.isEmpty ? String(base) : base + "?" + parts.joined(separator: "&")
    }

    /// `url` with the values of the parameters named in `names` shown as `REDACTED` (what a
    /// snapshot and a log line show: ignored parameters are often signatures).
    static func redacting(_ url: String, names: Set<String>) -> String {
        guard !names.isEmpty else { return url }
        return filtering(url, keep: { !names.contains(String($0)) }) { part in
            let name = part.prefix { $0 != "=" }
            return name.count == part.count ? String(part) : name + "=REDACTED"
        }
    }
}
