/// One hexadecimal digit's value, from its ASCII byte (either case); nil for any other byte. Pure.
public enum HexDigit {
    public static func value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `text` with each `%XX` decoded once, as bytes (not necessarily UTF-8); nil for a malformed
    /// escape. `+` is kept.
    public static func percentDecoded<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var bytes = text.utf8.makeIterator()
        while let byte = bytes.next() {
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                continue
            }
            guard let high = bytes.next().flatMap(value), let low = bytes.next().flatMap(value) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }
}
