import Glibc

/// What per-client limits count a peer address under. An IPv4 address stands for itself. An IPv6
/// address counts under its /64: one host (one home, one VM) is routinely handed a whole /64 and may
/// use any of its 2^64 addresses, so counting each address alone would let one client multiply its
/// share at will. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, a dual-stack socket's IPv4 peer)
/// counts as its IPv4 address. Anything that is not an address is kept as it is. Pure.
public enum ClientNetwork {
    public static func of(_ address: String) -> String {
        var text = address
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if let zone = text.firstIndex(of: "%") { text = String(text[..<zone]) }  // fe80::1%eth0
        guard text.contains(":") else { return address }
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return address }
        return withUnsafeMutableBytes(of: &bytes) { raw -> String in
            if raw[0..<10].allSatisfy({ $0 == 0 }) && raw[10] == 0xff && raw[11] == 0xff {
                return "\(raw[12]).\(raw[13]).\(raw[14]).\(raw[15])"
            }
            for index in 8..<16 { raw[index] = 0 }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil else { return address }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/64"
        }
    }
}
