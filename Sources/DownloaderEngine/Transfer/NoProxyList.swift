/// The hosts fetched directly although an upstream proxy is configured (`--no-proxy`): host names,
/// `*.suffix` (names below it), address literals and CIDRs, each optionally with `:port` (the
/// grammar of `EgressRule`). Matched against the URL's host of every hop, as written: a name entry
/// matches the name, a network entry a host that is an address literal (never what a name
/// resolves to). Pure.
struct NoProxyList: Sendable, Equatable {
    var entries: [EgressRule] = []

    init(entries: [EgressRule] = []) {
        self.entries = entries
    }

    /// Parses the entries; the first bad one is the error.
    init(_ raw: [String]) throws(ProxyConfigurationError) {
        for entry in raw {
            switch EgressRule.parse(entry) {
            case .success(let rule): entries.append(rule)
            case .failure(let error):
                throw ProxyConfigurationError(message: "no-proxy: \(error.message.replacingOccurrences(of: "host rule", with: "entry"))")
            }
        }
    }

    /// True when the hop to `host` (as the URL writes it) on `port` goes direct.
    func bypasses(host rawHost: String, port: Int) -> Bool {
        let host = EgressRules.normalized(rawHost)
        if let address = HostLiteral.address(host) {
            return entries.contains { $0.matches(address: address, port: port) }
        }
        return entries.contains { $0.matches(name: host, port: port) }
    }
}
