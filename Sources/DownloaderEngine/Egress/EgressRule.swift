/// One `--allow-host` / `--deny-host` entry. Pure.
///
/// Forms (case-insensitive; an optional `:port` limits a name or single address to that port):
/// - `origin.example.com`: exactly that host name (a trailing dot is ignored);
/// - `*.example.com`: any name below `example.com` (not `example.com` itself);
/// - `10.1.2.3`, `[2001:db8::1]` (or bare `2001:db8::1`): one address, in any spelling `HostLiteral` reads;
/// - `10.0.0.0/8`, `fc00::/7`: a network. An IPv4 network also covers the IPv4-mapped and NAT64
///   (64:ff9b::/96) forms of its addresses, which reach the same IPv4 host.
///
/// Name forms match the URL's host (and each redirect hop's); address and network forms match the
/// address actually connected to, and a URL whose host is an address literal.
struct EgressRule: Sendable, Equatable, CustomStringConvertible {
    enum Target: Sendable, Equatable {
        case name(String)
        /// A suffix starting with a dot, e.g. `.example.com`.
        case below(String)
        case network(IPNetwork)
    }

    var target: Target
    var port: Int?
    /// The entry as the operator wrote it.
    var description: String

    /// Parses an entry; the failure says what is wrong.
    static func parse(_ raw: String) -> Result<EgressRule, HostRuleError> {
        let text = raw.trimmingCharacters(in: .whitespaces).lowercased()
        func bad(_ why: String) -> Result<EgressRule, HostRuleError> {
            .failure(HostRuleError(message: "host rule '\(raw)': \(why)"))
        }
        guard !text.isEmpty else { return bad("empty") }
        if let slash = text.firstIndex(of: "/") {
            let addressText = String(text[..<slash])
            guard let length = Int(text[text.index(after: slash)...]),
                  let address = IPAddress(addressText.hasPrefix("[") ? String(addressText.dropFirst().dropLast()) : addressText),
                  let network = IPNetwork(address: address, prefixLength: length) else {
                return bad("expected a network like 10.0.0.0/8 or fc00::/7")
            }
            return .success(EgressRule(target: .network(network), port: nil, description: raw))
        }
        var host = text
        var port: Int?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return bad("unclosed [") }
            host = String(text[...close])
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()) else { return bad("expected [address]:port") }
                port = p
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            guard let p = Int(text[text.index(after: colon)...]) else { return bad("the port is not a number") }
            port = p
        }
        if let port, !(1...65535).contains(port) { return bad("the port must be 1-65535") }
        if let address = HostLiteral.address(host) {
            return .success(EgressRule(target: .network(IPNetwork(single: address)), port: port, description: raw))
        }
        if host.hasSuffix(".") { host.removeLast() }
        var below = false
        if host.hasPrefix("*.") {
            below = true
            host.removeFirst(2)
        }
        guard Self.isHostName(host) else { return bad("expected a host name, *.domain, an address or a network") }
        return .success(EgressRule(target: below ? .below("." + host) : .name(host), port: port, description: raw))
    }

    /// Letters, digits, `-` and `_` in dot-separated labels of 1-63 bytes.
    static func isHostName(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        return text.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.utf8.allSatisfy { c in
                (97...122).contains(c) || (48...57).contains(c) || c == 45 || c == 95
            }
        }
    }

    /// True for a host name (lower-case, no trailing dot) the name forms cover, on `port`.
    func matches(name: String, port: Int) -> Bool {
        guard self.port == nil || self.port == port else { return false }
        switch target {
        case .name(let exact): return name == exact
        case .below(let suffix): return name.hasSuffix(suffix) && name.count > suffix.count
        case .network: return false
        }
    }

    /// True for an address the address forms cover, on `port`. `viaEmbedded` also tries the IPv4
    /// address inside 6to4 and Teredo forms (for deny rules: never weaker than the range ban).
    func matches(address: IPAddress, port: Int, viaEmbedded: Bool = false) -> Bool {
        guard self.port == nil || self.port == port, case .network(let network) = target else { return false }
        if network.contains(address) { return true }
        return address.embeddedIPv4(includingTunnels: viaEmbedded).map(network.contains) ?? false
    }
}

/// An invalid `--allow-host` / `--deny-host` entry.
public struct HostRuleError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
