/// Where the engine may fetch from: the SSRF guard's whole policy. Pure, so a table test covers it.
///
/// - Deny rules always win.
/// - With any allow rule the engine is in allow-list mode: only hosts and addresses an allow rule
///   matches are fetched. An allow rule also lifts the private-range ban for what it matches (an
///   operator allowing `10.0.0.0/8` or `origin.internal` means it).
/// - Otherwise an address must be public (`AddressPolicy`), unless `allowPrivateNetworks`.
///
/// Name rules are checked against the URL's host and every redirect hop's host; address rules
/// against the address actually connected to (and a host that is an address literal).
struct EgressRules: Sendable, Equatable {
    enum Verdict: Sendable, Equatable {
        case allowed
        /// Refused; the reason names the rule or range, e.g. "127.0.0.1 is loopback".
        case forbidden(String)
        /// Depends on the address the name resolves to: decided at connect time.
        case undecided
    }

    var allowPrivateNetworks = false
    var allow: [EgressRule] = []
    var deny: [EgressRule] = []

    init(allowPrivateNetworks: Bool = false, allow: [EgressRule] = [], deny: [EgressRule] = []) {
        self.allowPrivateNetworks = allowPrivateNetworks
        self.allow = allow
        self.deny = deny
    }

    /// Rules from entries as the operator wrote them; the first bad entry is the error.
    init(allowPrivateNetworks: Bool, allow: [String], deny: [String]) throws(HostRuleError) {
        func parsed(_ entries: [String]) throws(HostRuleError) -> [EgressRule] {
            var rules: [EgressRule] = []
            for entry in entries { rules.append(try EgressRule.parse(entry).get()) }
            return rules
        }
        self.init(allowPrivateNetworks: allowPrivateNetworks, allow: try parsed(allow), deny: try parsed(deny))
    }

    var isAllowList: Bool { !allow.isEmpty }

    /// Before connecting: may `host` (a URL's or a redirect hop's; name or address literal, IPv6
    /// with or without brackets) on `port` be fetched?
    func screen(host rawHost: String, port: Int) -> Verdict {
        let host = Self.normalized(rawHost)
        if let address = HostLiteral.address(host) { return admit(host: nil, port: port, address: address) }
        if let rule = deny.first(where: { $0.matches(name: host, port: port) }) {
            return .forbidden("\(host) is denied (rule \(rule))")
        }
        guard isAllowList else { return .undecided }
        if allow.contains(where: { $0.matches(name: host, port: port) }) { return .allowed }
        if allow.contains(where: { if case .network = $0.target { return true } else { return false } }) {
            return .undecided
        }
        return .forbidden("\(host)\(Self.portSuffix(port)) is not on the allow list")
    }

    /// At connect time: may the hop to `host` (nil when unknown) on `port` connect to `address`?
    /// Never `.undecided`.
    func admit(host rawHost: String?, port: Int, address: IPAddress) -> Verdict {
        let host = rawHost.map(Self.normalized).flatMap { HostLiteral.address($0) == nil ? $0 : nil }
        if let host, let rule = deny.first(where: { $0.matches(name: host, port: port) }) {
            return .forbidden("\(host) is denied (rule \(rule))")
        }
        if let rule = deny.first(where: { $0.matches(address: address, port: port, viaEmbedded: true) }) {
            return .forbidden("\(address) is denied (rule \(rule))")
        }
        if isAllowList {
            let byName = host.map { name in allow.contains { $0.matches(name: name, port: port) } } ?? false
            if byName || allow.contains(where: { $0.matches(address: address, port: port) }) { return .allowed }
            return .forbidden("\(host.map { "\($0) (\(address))" } ?? "\(address)")\(Self.portSuffix(port)) is not on the allow list")
        }
        if allowPrivateNetworks { return .allowed }
        let category = AddressPolicy.category(of: address)
        return category == .global ? .allowed : .forbidden("\(address) is \(category.rawValue)")
    }

    /// Lower-case, brackets kept off IPv6, no trailing dot.
    static func normalized(_ host: String) -> String {
        var text = host.lowercased()
        if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if text.hasSuffix(".") && !text.contains(":") { text.removeLast() }
        return text
    }

    private static func portSuffix(_ port: Int) -> String { " port \(port)" }
}

extension EgressRules {
    /// The rules an engine configuration states.
    init(_ configuration: EngineConfiguration) throws(HostRuleError) {
        try self.init(allowPrivateNetworks: configuration.allowPrivateNetworks, allow: configuration.allowHosts,
                      deny: configuration.denyHosts)
    }

    /// The check `DownloadEngine.request` makes before anything else: a URL whose host is refused
    /// already (an address literal in a denied range, a denied name, a host not allow-listed)
    /// throws `destinationForbidden`; a name that must be resolved first passes (connect time decides).
    func screen(url: String) throws(EngineError) {
        guard let hop = HopTarget(url: url) else { return }  // the normaliser reports bad URLs
        if case .forbidden(let reason) = screen(host: hop.host, port: hop.port) {
            throw .destinationForbidden(reason)
        }
    }
}
