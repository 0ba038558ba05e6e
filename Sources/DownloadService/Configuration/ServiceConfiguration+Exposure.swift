import Glibc

extension ServiceConfiguration {
    /// Whether the service answers beyond this machine without any token: every caller may then
    /// start downloads and use `/admin`. Fine on loopback (the default); anywhere else it is logged
    /// as a warning at start.
    var isOpenBeyondLoopback: Bool {
        authToken == nil && adminToken == nil && !Self.isLoopback(host)
    }

    /// An IPv4 or IPv6 address in numeric form (what the server binds; no names are looked up).
    static func isNumericAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The address that listens on every interface, in any spelling (`0.0.0.0`, `::`, `::0`,
    /// `::ffff:0.0.0.0`): no address another machine can reach this one at.
    static func isWildcard(_ host: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return v4.s_addr == 0 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        return bytes.allSatisfy { $0 == 0 } || (bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
            && bytes[12...].allSatisfy { $0 == 0 })
    }

    /// A numeric address in 127.0.0.0/8 or `::1` (also written as IPv4-mapped `::ffff:127.x.y.z`).
    static func isLoopback(_ host: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
    }
}
