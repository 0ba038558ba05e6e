/// A request-target's form (RFC 9112 §3.2). A server must accept the absolute form
/// (`GET http://host:8080/fetch?url=… HTTP/1.1`: what a client configured to use this server as
/// its proxy sends, and what some libraries send anyway): its path and query are the target, and
/// its authority replaces any `Host` field (§3.2.2). Pure, so a table test covers it.
enum RequestTarget: Equatable {
    /// `/path?query`, `*`, or a CONNECT's authority: handed on as it came.
    case asSent
    /// An `http` or `https` URI: the origin-form target (`/` when its path is empty) and the authority.
    case absolute(target: String, host: String)
    /// An absolute URI this server cannot take: why.
    case invalid(String)

    /// The form of `target`.
    static func classify(_ target: String) -> RequestTarget {
        guard let first = target.utf8.first, first != UInt8(ascii: "/"), first != UInt8(ascii: "*"),
              let colon = target.utf8.firstIndex(of: UInt8(ascii: ":")) else { return .asSent }
        let scheme = target[..<colon].lowercased()
        let rest = target[target.index(after: colon)...]
        // Not `scheme://`: a CONNECT's `host:port`, left to the method's handling.
        guard rest.hasPrefix("//") else { return .asSent }
        guard scheme == "http" || scheme == "https" else { return .invalid("unsupported scheme in request target") }
        let afterSlashes = rest.dropFirst(2)
        let end = afterSlashes.firstIndex { $0 == "/" || $0 == "?" } ?? afterSlashes.endIndex
        let authority = String(afterSlashes[..<end])
        // RFC 9110 §4.2.1: an http URI with an empty host is invalid; §4.2.4: userinfo is an error.
        guard !authority.isEmpty, !authority.hasPrefix(":") else { return .invalid("request target without a host") }
        guard !authority.contains("@") else { return .invalid("userinfo in request target") }
        guard RequestParser.isValidHost(authority) else { return .invalid("invalid host in request target") }
        let pathAndQuery = afterSlashes[end...]
        return .absolute(target: pathAndQuery.hasPrefix("/") ? String(pathAndQuery) : "/" + pathAndQuery, host: authority)
    }
}
