import Foundation

/// Serialises JSON-compatible values (`[String: Any]`, arrays, strings, numbers, `NSNull`) with
/// sorted keys and unescaped slashes, so responses are stable and readable.
enum JSON {
    static func bytes(_ object: Any) -> [UInt8] {
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

    /// RFC 3339 timestamp with milliseconds, in UTC.
    static func timestamp(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).format(date)
    }
}
