import DownloaderEngine

extension ServiceConfiguration {
    /// No `--auth-token`: every caller may start downloads, read files and cancel its own (and,
    /// without `--admin-token` too, use `/admin`). An admin token alone leaves the caller routes
    /// open, so it changes nothing here.
    var callersNeedNoToken: Bool { authToken == nil }

    /// Whether the service answers callers beyond this machine without a token. Fine on loopback
    /// (the default); anywhere else it is logged as a warning at start.
    var isOpenBeyondLoopback: Bool { callersNeedNoToken && !Self.isLoopback(host) }

    /// An IPv4 or IPv6 address in numeric form (what the server binds; no names are looked up).
    static func isNumericAddress(_ host: String) -> Bool {
        AddressPolicy.category(ofLiteral: host) != nil
    }

    /// The address that listens on every interface, in any spelling (`0.0.0.0`, `::`, `::0`,
    /// `::ffff:0.0.0.0`): no address another machine can reach this one at.
    static func isWildcard(_ host: String) -> Bool {
        AddressPolicy.category(ofLiteral: host) == .unspecified
    }

    /// A numeric address in 127.0.0.0/8 or `::1` (also written as IPv4-mapped `::ffff:127.x.y.z`).
    static func isLoopback(_ host: String) -> Bool {
        AddressPolicy.category(ofLiteral: host) == .loopback
    }
}
