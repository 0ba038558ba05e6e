/// How one hop of an attempt reaches its origin when an upstream proxy is configured. Pure.
///
/// The SSRF guard keeps its promise through the proxy: the transfer resolves the hop's host itself,
/// vets every address with the same rules as a direct connection (`EgressRules.admit`), and has
/// the proxy open its tunnel (`CONNECT`) to the chosen address, never to the name, so the proxy's
/// own resolver cannot be steered elsewhere. TLS is still checked against the URL's name.
enum HopRoute: Equatable, Sendable {
    /// libcurl connects itself (no proxy, or the host is on the no-proxy list); the guard judges
    /// the address at connect time as without a proxy.
    case direct
    /// Through the proxy, tunnelled to this vetted address.
    case tunnel(IPAddress)
    /// Through the proxy, once the host's addresses are known (`choose`).
    case lookup(host: String, port: Int)
    /// The guard refuses the hop; the reason names the rule or range.
    case refused(String)
    /// The host has no address (the message says which).
    case unresolved(String)

    static func plan(url: String, proxy: UpstreamProxy?, noProxy: NoProxyList, egress: EgressRules) -> HopRoute {
        guard proxy != nil else { return .direct }
        guard let hop = HopTarget(url: url) else { return .refused("the URL's host and port cannot be read") }
        guard !noProxy.bypasses(host: hop.host, port: hop.port) else { return .direct }
        if case .forbidden(let reason) = egress.screen(host: hop.host, port: hop.port) { return .refused(reason) }
        if let address = HostLiteral.address(hop.host) { return choose([address], host: hop.host, port: hop.port, egress: egress) }
        return .lookup(host: hop.host, port: hop.port)
    }

    /// The first of `addresses` (in the resolver's order) that the guard admits for the hop to
    /// `host` on `port`; every refused one is skipped, as a direct connection would skip it.
    static func choose(_ addresses: [IPAddress], host: String, port: Int, egress: EgressRules) -> HopRoute {
        if let first = admitted(addresses, host: host, port: port, egress: egress).first { return .tunnel(first) }
        for address in addresses {
            if case .forbidden(let reason) = egress.admit(host: host, port: port, address: address) { return .refused(reason) }
        }
        return .unresolved("could not resolve host: \(host)")
    }

    /// Every one of `addresses` the guard admits, in the resolver's order: the tunnel's first choice,
    /// then the ones it falls back to when the proxy cannot reach it, as libcurl goes on to a
    /// host's next address on a direct connection.
    static func admitted(_ addresses: [IPAddress], host: String, port: Int, egress: EgressRules) -> [IPAddress] {
        addresses.filter { address in
            switch egress.admit(host: host, port: port, address: address) {
            case .allowed, .undecided: true
            case .forbidden: false
            }
        }
    }

    /// libcurl's `CURLOPT_CONNECT_TO` entry sending every connection of the hop to `address`:
    /// `::[address]:port` (any host, any port → there), so no spelling of the host can escape it.
    static func connectTo(_ address: IPAddress, port: Int) -> String {
        switch address {
        case .v4: "::\(address):\(port)"
        case .v6: "::[\(address)]:\(port)"
        }
    }
}
