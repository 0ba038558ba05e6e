/// Reads a URL host the way the resolver would before any DNS query: IPv4 in the classic
/// `inet_aton` forms (1 to 4 parts, each decimal, octal with a leading `0`, or hex with `0x`; the
/// last part fills the remaining bytes, so `127.1`, `2130706433`, `0x7f000001` and `0177.0.0.1` are
/// all 127.0.0.1) and IPv6 literals with or without brackets. Anything else is a host name. Pure.
enum HostLiteral {
    /// The address `host` spells, or nil when it is a name.
    static func address(_ host: String) -> IPAddress? {
        var text = host
        if text.hasPrefix("[") && text.hasSuffix("]") && text.count >= 2 {
            text = String(text.dropFirst().dropLast())
            return text.contains(":") ? IPAddress(text) : nil
        }
        if text.contains(":") { return IPAddress(text) }
        return ipv4(text)
    }

    /// `inet_aton` semantics (no trailing garbage accepted).
    static func ipv4(_ text: String) -> IPAddress? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            values.append(value)
        }
        // Every part but the last is one byte; the last fills the remaining (4 - count + 1) bytes.
        var bits: UInt64 = 0
        for value in values.dropLast() {
            guard value <= 0xff else { return nil }
            bits = bits << 8 | value
        }
        let lastBytes = UInt64(4 - (values.count - 1))
        guard let last = values.last, last < (UInt64(1) << (8 * lastBytes)) else { return nil }
        bits = bits << (8 * lastBytes) | last
        return .v4(UInt32(truncatingIfNeeded: bits))
    }

    /// One part: `0x…` hex, `0…` octal, else decimal; nil when empty, malformed or over 32 bits.
    private static func number(_ part: Substring) -> UInt64? {
        var digits = part
        var radix = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            radix = 16
            digits = digits.dropFirst(2)
            if digits.isEmpty { return 0 }  // inet_aton reads a bare "0x" as 0
        } else if digits.count > 1 && digits.hasPrefix("0") {
            radix = 8
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty, digits.count <= 32,
              digits.utf8.allSatisfy({ isDigit($0, radix: radix) }),
              let value = UInt64(digits, radix: radix), value <= UInt64(UInt32.max) else { return nil }
        return value
    }

    private static func isDigit(_ byte: UInt8, radix: Int) -> Bool {
        switch radix {
        case 16: return (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
        case 8: return (48...55).contains(byte)
        default: return (48...57).contains(byte)
        }
    }
}
