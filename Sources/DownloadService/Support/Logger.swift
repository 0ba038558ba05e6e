import Foundation

/// Writes one JSON object per line to stderr: `{"ts":…,"level":…,"msg":…, fields…}`.
struct Logger: Sendable {
    enum Level: String, Sendable { case debug, info, warning, error }

    /// Where lines go; stderr by default, injectable for tests.
    let sink: @Sendable (String) -> Void

    init(sink: @escaping @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }) {
        self.sink = sink
    }

    func log(_ level: Level, _ message: String, _ fields: [String: Any] = [:], at date: Date = Date()) {
        var object = fields
        object["ts"] = JSON.timestamp(date)
        object["level"] = level.rawValue
        object["msg"] = message
        sink(JSON.string(object))
    }

    func info(_ message: String, _ fields: [String: Any] = [:]) { log(.info, message, fields) }
    func warning(_ message: String, _ fields: [String: Any] = [:]) { log(.warning, message, fields) }
    func error(_ message: String, _ fields: [String: Any] = [:]) { log(.error, message, fields) }
}
