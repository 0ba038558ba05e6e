import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The URLs the engine fetches, as one exact grammar (a subset of RFC 3986): `http`/`https`, a DNS
/// host name, an IPv4 address or a bracketed IPv6 literal, an optional port 1–65535, then path,
/// query and fragment made of unreserved, sub-delim, `:`/`@` and percent-encoded characters.
/// No user info, no spaces, no raw non-ASCII. `openapi.yaml` states the same pattern (without
/// the IPv6 alternative, which a regular expression cannot check exactly; `inet_pton` does here).
enum URLGrammar {
    static let character = #"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"#
    static let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    static let port = "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
    static let tail = "(?::\(port))?(?:/\(character)*)*(?:\\?(?:\(character)|[/?])*)?(?:#(?:\(character)|[/?])*)?$"
    /// The pattern in `openapi.yaml`: DNS names and IPv4 only.
    static let pattern = "^[Hh][Tt][Tt][Pp][Ss]?://\(label)(?:\\.\(label))*\(tail)"
    private static let ipv6Pattern = "^[Hh][Tt][Tt][Pp][Ss]?://\\[([0-9A-Fa-f:.]{2,45})\\]\(tail)"
    /// `user[:password]@` (only with `allowURLCredentials`; never in `pattern`).
    static let userInfo = #"(?:(?:[A-Za-z0-9._~!$&'()*+,;=:-]|%[0-9A-Fa-f]{2})*@)?"#
    private static let credentialPattern = "^[Hh][Tt][Tt][Pp][Ss]?://\(userInfo)\(label)(?:\\.\(label))*\(tail)"
    private static let credentialIPv6Pattern = "^[Hh][Tt][Tt][Pp][Ss]?://\(userInfo)\\[([0-9A-Fa-f:.]{2,45})\\]\(tail)"

    private static let names = try? NSRegularExpression(pattern: pattern)
    private static let literals = try? NSRegularExpression(pattern: ipv6Pattern)
    private static let namesWithCredentials = try? NSRegularExpression(pattern: credentialPattern)
    private static let literalsWithCredentials = try? NSRegularExpression(pattern: credentialIPv6Pattern)

    /// True when `url` matches the grammar; `allowingCredentials` also accepts `user:password@`.
    static func accepts(_ url: String, allowingCredentials: Bool = false) -> Bool {
        let range = NSRange(url.startIndex..., in: url)
        let (names, literals) = allowingCredentials ? (namesWithCredentials, literalsWithCredentials)
                                                    : (Self.names, Self.literals)
        if names?.firstMatch(in: url, range: range) != nil { return true }
        guard let match = literals?.firstMatch(in: url, range: range),
              let hostRange = Range(match.range(at: 1), in: url) else { return false }
        var address = in6_addr()
        return inet_pton(AF_INET6, String(url[hostRange]), &address) == 1
    }
}
