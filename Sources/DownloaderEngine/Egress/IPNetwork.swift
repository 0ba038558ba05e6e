/// An address prefix such as 10.0.0.0/8 or fc00::/7. Pure.
struct IPNetwork: Sendable, Equatable {
    /// The network's address with the host bits cleared.
    var address: IPAddress
    var prefixLength: Int

    init?(address: IPAddress, prefixLength: Int) {
        switch address {
        case .v4(let bits):
            guard (0...32).contains(prefixLength) else { return nil }
            self.address = .v4(prefixLength == 0 ? 0 : bits & ~UInt32(0) << (32 - prefixLength))
        case .v6(let high, let low):
            guard (0...128).contains(prefixLength) else { return nil }
            self.address = .v6(high: Self.masked(high, bits: min(64, prefixLength)),
                               low: Self.masked(low, bits: max(0, prefixLength - 64)))
        }
        self.prefixLength = prefixLength
    }

    /// The network holding just `address`.
    init(single address: IPAddress) {
        self.address = address
        switch address {
        case .v4: prefixLength = 32
        case .v6: prefixLength = 128
        }
    }

    func contains(_ candidate: IPAddress) -> Bool {
        switch (address, candidate) {
        case (.v4, .v4(let bits)):
            return IPNetwork(address: .v4(bits), prefixLength: prefixLength)?.address == address
        case (.v6, .v6(let high, let low)):
            return IPNetwork(address: .v6(high: high, low: low), prefixLength: prefixLength)?.address == address
        default:
            return false
        }
    }

    private static func masked(_ value: UInt64, bits: Int) -> UInt64 {
        bits == 0 ? 0 : value & ~UInt64(0) << (64 - bits)
    }
}

extension IPAddress {
    /// The IPv4 address an IPv6 address stands for: IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible
    /// (::a.b.c.d, not :: or ::1) and NAT64 (64:ff9b::/96); with `includingTunnels` also 6to4
    /// (2002::/16) and Teredo's client address (2001::/32, stored inverted). nil for IPv4 and others.
    func embeddedIPv4(includingTunnels: Bool = false) -> IPAddress? {
        guard case .v6(let high, let low) = self else { return nil }
        let last32 = UInt32(truncatingIfNeeded: low)
        if high == 0 && low >> 32 == 0xffff { return .v4(last32) }
        if high == 0 && low >> 32 == 0 && last32 > 1 { return .v4(last32) }
        if high == 0x0064_ff9b_0000_0000 && low >> 32 == 0 { return .v4(last32) }
        guard includingTunnels else { return nil }
        if high >> 48 == 0x2002 { return .v4(UInt32(truncatingIfNeeded: high >> 16)) }
        if high >> 32 == 0x2001_0000 { return .v4(~last32) }
        return nil
    }
}
