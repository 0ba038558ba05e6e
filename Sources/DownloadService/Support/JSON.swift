import Foundation

/// Serialises JSON-compatible values (`[String: Any]`, arrays, strings, integers, doubles, bools,
/// `NSNull`, nil) with keys in byte order and unescaped slashes, so responses and log lines are
/// stable and readable. Hand-written because it runs once or twice per request (answer, access log)
/// and once per progress event: Foundation's `JSONSerialization` with `.sortedKeys` cost about
/// 75 % of the service's CPU per request (`scripts/bench` section 4, perf). A value of another
/// type falls back to `JSONSerialization` for the whole object.
enum JSON {
    static func bytes(_ object: Any) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        if write(object, into: &out) { return out }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return Array(#"{"error":{"code":"internal","message":"response encoding failed"}}"#.utf8)
        }
        return [UInt8](data)
    }

    static func string(_ object: Any) -> String {
        String(decoding: bytes(object), as: UTF8.self)
    }

    /// `value` or JSON `null`.
    static func orNull(_ value: Any?) -> Any { value ?? NSNull() }

    /// Appends `value`; false for a type it does not know (the caller falls back).
    private static func write(_ value: Any, into out: inout [UInt8]) -> Bool {
        // Class casts (NSNull) come last: trying one on a Swift dictionary bridges it to NSDictionary.
        switch value {
        case let string as String: writeString(string, into: &out)
        case let int as Int: writeInteger(Int64(int), into: &out)
        case let double as Double: writeDouble(double, into: &out)
        case let bool as Bool: bool ? writeLiteral("true", into: &out) : writeLiteral("false", into: &out)
        case let object as [String: Any]:
            out.append(UInt8(ascii: "{"))
            for (index, key) in object.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                guard write(object[key]!, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "}"))
        case let array as [Any]:
            out.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                guard write(element, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        case let int as Int64: writeInteger(int, into: &out)
        case let int as UInt64: out.append(contentsOf: String(int).utf8)
        case let int as Int32: writeInteger(Int64(int), into: &out)
        case let optional as Any? where optional == nil: writeLiteral("null", into: &out)
        case is NSNull: writeLiteral("null", into: &out)
        default: return false
        }
        return true
    }

    /// Integral values as integers (like JSONSerialization); non-finite ones as null.
    static func writeDouble<Out: JSONOutput>(_ double: Double, into out: inout Out) {
        if !double.isFinite {
            writeLiteral("null", into: &out)
        } else if double == double.rounded(), abs(double) < 1e15 {
            writeInteger(Int64(double), into: &out)
        } else {
            var text = "\(double)"
            text.withUTF8 { out.append(bytes: $0) }
        }
    }

    /// Appends a literal's bytes (static storage: one copy, no `String`).
    @inline(__always)
    static func writeLiteral<Out: JSONOutput>(_ literal: StaticString, into out: inout Out) {
        out.append(bytes: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends an integer's decimal digits (no `String` on the way).
    static func writeInteger<Out: JSONOutput>(_ value: Int64, into out: inout Out) {
        if value >= 0 && value < 10 {
            out.append(byte: UInt8(48 + value))
            return
        }
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for Int64.min's 20
        withUnsafeMutableBytes(of: &scratch) { b in
            var v = value.magnitude
            var start = 24
            repeat {
                start -= 1
                b[start] = UInt8(48 + v % 10)
                v /= 10
            } while v > 0
            if value < 0 {
                start -= 1
                b[start] = UInt8(ascii: "-")
            }
            out.append(bytes: UnsafeRawBufferPointer(rebasing: b[start...]).bindMemory(to: UInt8.self))
        }
    }

    static func writeString<Out: JSONOutput>(_ string: String, into out: inout Out) {
        var string = string  // `withUTF8` needs a var; native strings are not copied
        string.withUTF8 { bytes in
            out.append(byte: UInt8(ascii: "\""))
            // Most strings need no escape: one scan of the contiguous bytes, then one copy.
            if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(bytes: bytes)
            } else {
                for byte in bytes { appendEscaped(byte, into: &out) }
            }
            out.append(byte: UInt8(ascii: "\""))
        }
    }

    private static func appendEscaped<Out: JSONOutput>(_ byte: UInt8, into out: inout Out) {
        switch byte {
        case UInt8(ascii: "\""): writeLiteral(#"\""#, into: &out)
        case UInt8(ascii: "\\"): writeLiteral(#"\\"#, into: &out)
        case 0x0A: writeLiteral(#"\n"#, into: &out)
        case 0x0D: writeLiteral(#"\r"#, into: &out)
        case 0x09: writeLiteral(#"\t"#, into: &out)
        case 0..<0x20:
            let hex: StaticString = "0123456789abcdef"
            writeLiteral(#"\u00"#, into: &out)
            out.append(byte: hex.utf8Start[Int(byte >> 4)])
            out.append(byte: hex.utf8Start[Int(byte & 0x0f)])
        default: out.append(byte: byte)
        }
    }
}
