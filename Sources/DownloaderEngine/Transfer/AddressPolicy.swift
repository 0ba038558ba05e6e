import Glibc

/// An IPv4 or IPv6 address as raw bits (network order folded into integers).
enum IPAddress: Sendable, Equatable, CustomStringConvertible {
    case v4(UInt32)
    case v6(high: UInt64, low: UInt64)

    /// Parses dotted IPv4 or textual IPv6 (as libcurl reports `conn_primary_ip`); nil otherwise.
    init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self = .v4(UInt32(bigEndian: v4.s_addr))
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        self = withUnsafeBytes(of: &v6) { IPAddress(ipv6Bytes: $0) }
    }

    /// Reads an AF_INET/AF_INET6 socket address of `length` bytes; nil for other families.
    init?(socketAddress: UnsafePointer<sockaddr>, length: Int) {
        switch Int32(socketAddress.pointee.sa_family) {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            let address = UnsafeRawPointer(socketAddress).loadUnaligned(as: sockaddr_in.self)
            self = .v4(UInt32(bigEndian: address.sin_addr.s_addr))
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            var address = UnsafeRawPointer(socketAddress).loadUnaligned(as: sockaddr_in6.self)
            self = withUnsafeBytes(of: &address.sin6_addr) { IPAddress(ipv6Bytes: $0) }
        default:
            return nil
        }
    }

    private init(ipv6Bytes bytes: UnsafeRawBufferPointer) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 { high = high << 8 | UInt64(bytes[index]) }
        for index in 8..<16 { low = low << 8 | UInt64(bytes[index]) }
        self = .v6(high: high, low: low)
    }

    var description: String {
        switch self {
        case .v4(let bits):
            return "\(bits >> 24).\(bits >> 16 & 0xff).\(bits >> 8 & 0xff).\(bits & 0xff)"
        case .v6(let high, let low):
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { bytes in
                for index in 0..<8 { bytes[index] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(index))) }
                for index in 0..<8 { bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(index))) }
            }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &address, &text, socklen_t(INET6_ADDRSTRLEN)) != nil else { return "?" }
            return String(cString: text)
        }
    }
}

/// Which addresses an origin may live at (the SSRF guard). Pure: the transfer asks it about the real
/// address at connect time, so DNS rebinding and redirects cannot reach a non-public address.
public struct AddressPolicy: Sendable, Equatable {
    /// What kind of address it is; everything but `.global` is refused unless private networks are allowed.
    public enum Category: String, Sendable, Equatable {
        case global
        case unspecified
        case loopback
        case privateUse = "private"
        case sharedAddressSpace = "shared address space (CGNAT)"
        case linkLocal = "link-local"
        case multicast
        case broadcast
        case documentation
        case reserved
    }

    /// Allow every address (the engine's `allowPrivateNetworks`).
    var allowPrivateNetworks: Bool

    /// True if a connection to `address` is allowed.
    func allows(_ address: IPAddress) -> Bool {
        allowPrivateNetworks || Self.category(of: address) == .global
    }

    /// What the numeric address `text` is (IPv4 or IPv6, as `inet_pton` reads it); nil when `text`
    /// is no address. The service judges its listening address and requests' `Host` with it.
    public static func category(ofLiteral text: String) -> Category? {
        IPAddress(text).map(category(of:))
    }

    static func category(of address: IPAddress) -> Category {
        switch address {
        case .v4(let bits): return category(ipv4: bits)
        case .v6(let high, let low): return category(ipv6High: high, low: low)
        }
    }

    private static func category(ipv4 bits: UInt32) -> Category {
        func within(_ prefix: UInt32, _ length: UInt32) -> Bool {
            bits >> (32 - length) == prefix >> (32 - length)
        }
        if bits == 0xffff_ffff { return .broadcast }
        if within(0x0000_0000, 8) { return .unspecified }  // 0.0.0.0/8 "this network"
        if within(0x7f00_0000, 8) { return .loopback }
        if within(0x0a00_0000, 8) || within(0xac10_0000, 12) || within(0xc0a8_0000, 16) { return .privateUse }
        if within(0x6440_0000, 10) { return .sharedAddressSpace }
        if within(0xa9fe_0000, 16) { return .linkLocal }
        if within(0xe000_0000, 4) { return .multicast }
        if within(0xc000_0200, 24) || within(0xc633_6400, 24) || within(0xcb00_7100, 24) { return .documentation }
        if within(0xf000_0000, 4)        // 240/4 future use
            || within(0xc000_0000, 24)   // 192.0.0/24 IETF protocol assignments
            || within(0xc058_6300, 24)   // 192.88.99/24 6to4 relay anycast
            || within(0xc612_0000, 15) { // 198.18/15 benchmarking
            return .reserved
        }
        return .global
    }

    private static func category(ipv6High high: UInt64, low: UInt64) -> Category {
        let embeddedV4 = UInt32(truncatingIfNeeded: low)
        if high == 0 && low == 0 { return .unspecified }
        if high == 0 && low == 1 { return .loopback }
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (deprecated compatible): judge the IPv4 address.
        if high == 0 && (low >> 32 == 0xffff || low >> 32 == 0) { return category(ipv4: embeddedV4) }
        // 64:ff9b::/96 NAT64 well-known prefix: the IPv4 address behind it.
        if high == 0x0064_ff9b_0000_0000 && low >> 32 == 0 { return category(ipv4: embeddedV4) }
        // 2002::/16 6to4: the IPv4 address in bits 16..47.
        if high >> 48 == 0x2002 { return category(ipv4: UInt32(truncatingIfNeeded: high >> 16)) }
        let top16 = high >> 48
        if top16 >> 8 == 0xff { return .multicast }           // ff00::/8
        if top16 >> 9 == 0xfc00 >> 9 { return .privateUse }   // fc00::/7 unique local
        if top16 >> 6 == 0xfe80 >> 6 { return .linkLocal }    // fe80::/10
        if top16 >> 6 == 0xfec0 >> 6 { return .privateUse }   // fec0::/10 site-local (deprecated)
        if high >> 32 == 0x2001_0db8 { return .documentation } // 2001:db8::/32
        if high >> 41 == 0x2001_0000 >> 9 { return .reserved } // 2001::/23 IETF (Teredo, ORCHID, …)
        if top16 >> 13 != 0b001 { return .reserved }          // outside 2000::/3 global unicast
        return .global
    }
}
