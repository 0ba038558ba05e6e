import Glibc

/// What per-client limits count a peer address under. Pure.
/// - IPv4: the address itself.
/// - Public IPv6: its /64. One host (one home, one VM) is routinely handed a whole /64 and may use
///   any of its 2^64 addresses, so counting each address alone would let one client multiply its
///   share at will.
/// - Private IPv6 (unique local `fc00::/7`, link-local `fe80::/10`, loopback): the address itself.
///   A /64 there is a network of many hosts (a Kubernetes node's pods), not one host.
/// - IPv6 carrying an IPv4 client: that IPv4 address. IPv4-mapped `::ffff:a.b.c.d` (a dual-stack
///   socket's IPv4 peer), NAT64 `64:ff9b::/96` (in its last 32 bits), Teredo `2001::/32` (the
///   client's address, inverted, in its last 32 bits).
/// Anything that is not an address is kept as it is.
public enum ClientNetwork {
    public static func of(_ address: String) -> String {
        var text = address
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if let zone = text.firstIndex(of: "%") { text = String(text[..<zone]) }  // fe80::1%eth0
        guard text.contains(":") else { return address }
        var storage = in6_addr()
        guard inet_pton(AF_INET6, text, &storage) == 1 else { return address }
        var bytes = withUnsafeBytes(of: &storage) { Array($0) }
        let head = Array(bytes[0..<12])
        if head == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] || head == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] {
            return bytes[12..<16].map(String.init).joined(separator: ".")
        }
        if bytes[0..<4] == [0x20, 0x01, 0, 0] {  // Teredo: the client's IPv4 address, each bit inverted
            return bytes[12..<16].map { String($0 ^ 0xff) }.joined(separator: ".")
        }
        let isLoopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
        let isPrivate = isLoopback || bytes[0] & 0xfe == 0xfc || (bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80)
        if !isPrivate { for index in 8..<16 { bytes[index] = 0 } }
        return canonical(bytes) + (isPrivate ? "" : "/64")
    }

    /// The canonical text of 16 address bytes.
    private static func canonical(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written = bytes.withUnsafeBytes { inet_ntop(AF_INET6, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return bytes.map { String($0, radix: 16) }.joined(separator: ":") }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
