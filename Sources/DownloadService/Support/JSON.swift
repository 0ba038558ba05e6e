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

    /// RFC 3339 timestamp with milliseconds (truncated), in UTC: `2026-11-30T06:27:38.969Z`, the
    /// format of `ISO8601FormatStyle` at a fraction of its cost (it runs for every log line and
    /// twice per snapshot answer).
    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let whole = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        var seconds = time_t(whole)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil, (0...9999).contains(Int(parts.tm_year) + 1900) else {
            return Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).format(date)
        }
        var out = [UInt8]()
        out.reserveCapacity(24)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4); out.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2); out.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2); out.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2); out.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2); out.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2); out.append(UInt8(ascii: "."))
        digits(Int(milliseconds - whole * 1000), 3); out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `value`; false for a type it does not know (the caller falls back).
    private static func write(_ value: Any, into out: inout [UInt8]) -> Bool {
        // Class casts (NSNull) come last: trying one on a Swift dictionary bridges it to NSDictionary.
        switch value {
        case let string as String: writeString(string, into: &out)
        case let int as Int: out.append(contentsOf: String(int).utf8)
        case let double as Double: writeDouble(double, into: &out)
        case let bool as Bool: out.append(contentsOf: bool ? Array("true".utf8) : Array("false".utf8))
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
        case let int as Int64: out.append(contentsOf: String(int).utf8)
        case let int as UInt64: out.append(contentsOf: String(int).utf8)
        case let int as Int32: out.append(contentsOf: String(int).utf8)
        case let optional as Any? where optional == nil: out.append(contentsOf: "null".utf8)
        case is NSNull: out.append(contentsOf: "null".utf8)
        default: return false
        }
        return true
    }

    /// Integral values as integers (like JSONSerialization); non-finite ones as null.
    static func writeDouble(_ double: Double, into out: inout [UInt8]) {
        if !double.isFinite {
            out.append(contentsOf: "null".utf8)
        } else if double == double.rounded(), abs(double) < 1e15 {
            out.append(contentsOf: String(Int64(double)).utf8)
        } else {
            out.append(contentsOf: "\(double)".utf8)
        }
    }

    static func writeString(_ string: String, into out: inout [UInt8]) {
        var string = string  // `withUTF8` needs a var; native strings are not copied
        string.withUTF8 { bytes in
            out.append(UInt8(ascii: "\""))
            // Most strings need no escape: one scan of the contiguous bytes, then one copy.
            if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(contentsOf: bytes)
            } else {
                for byte in bytes { appendEscaped(byte, into: &out) }
            }
            out.append(UInt8(ascii: "\""))
        }
    }

    private static func appendEscaped(_ byte: UInt8, into out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
        case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
        case 0x0A: out.append(contentsOf: #"\n"#.utf8)
        case 0x0D: out.append(contentsOf: #"\r"#.utf8)
        case 0x09: out.append(contentsOf: #"\t"#.utf8)
        case 0..<0x20:
            let hex = Array("0123456789abcdef".utf8)
            out.append(contentsOf: #"\u00"#.utf8)
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0f)])
        default: out.append(byte)
        }
    }
}
