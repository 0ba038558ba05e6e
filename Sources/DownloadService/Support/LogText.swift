import Foundation

/// How log lines are written: one JSON object per line (for machines, the default when stderr is
/// not a terminal), or `key=value` text for a person at a terminal.
enum LogFormat: String, Sendable, Equatable, CaseIterable {
    case json, text
}

/// The text form of a log line: `2026-11-30T06:27:38.969Z INFO  listening host=127.0.0.1 port=8080 …`,
/// fields in key order; a value with spaces, quotes or `=` is written as a JSON string. Pure.
enum LogText {
    static func line(timestamp: String, level: String, message: String, fields: [String: Any]) -> String {
        var out = timestamp + " " + level.uppercased().padding(toLength: 5, withPad: " ", startingAt: 0) + " " + message
        for key in fields.keys.sorted() {
            out += " " + key + "=" + value(fields[key]!)
        }
        return out
    }

    static func value(_ value: Any) -> String {
        if let string = value as? String {
            let plain = !string.isEmpty && !string.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline })
            return plain ? string : JSON.string([string]).dropFirst().dropLast().description
        }
        return JSON.string([value]).dropFirst().dropLast().description
    }
}
