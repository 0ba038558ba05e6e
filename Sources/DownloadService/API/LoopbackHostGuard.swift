import MiniHTTPServer

/// DNS rebinding: a web page at `evil.example` has its name point at 127.0.0.1; the user's browser
/// then sends it same-origin requests here (`Host: evil.example:8080`) and reads the answers: the
/// list of downloads, the files. With no token, on loopback (the default), nothing else stands in
/// the way. So such a service answers only requests that name it as this machine or as no public
/// DNS name can: an address literal, `localhost` or a `*.localhost` name (RFC 6761), a name of one
/// label (`myhost`, a container's name); any other (a name with a dot) is `421`. A request without
/// `Host` (no browser sends one) passes. Pure.
enum LoopbackHostGuard {
    static func refusal(headers: HTTPHeaders) -> APIError? {
        guard let host = headers["host"], !allows(host: host) else { return nil }
        return APIError(status: 421, .misdirected,
                        "this service, listening on loopback without a token, answers only to an address, localhost, *.localhost"
                            + " or a one-label name in Host (a page of another site may have its name point here: DNS rebinding)")
    }

    /// `host[:port]` names this machine, or nothing public DNS (another party) resolves.
    static func allows(host field: String) -> Bool {
        var name = Substring(field.lowercased())
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            name = name[name.index(after: name.startIndex)..<close]
        } else if let colon = name.lastIndex(of: ":"), name.firstIndex(of: ":") == colon {
            name = name[..<colon]  // One colon: a port. More: an IPv6 address without brackets (refused below if not one).
        }
        if name.hasSuffix(".") { name = name.dropLast() }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if !name.isEmpty && !name.contains(".") && !name.contains(":") { return true }  // One label.
        return ServiceConfiguration.isNumericAddress(String(name))
    }
}
