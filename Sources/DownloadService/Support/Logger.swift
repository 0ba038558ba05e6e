import DownloaderEngine
import Foundation
import MiniHTTPServer

/// Writes one JSON object per line to stderr: `{"ts":…,"level":…,"msg":…, fields…}` (or the same
/// as text, `LogText`), dropping lines below `minimumLevel`.
struct Logger: Sendable {
    enum Level: String, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error

        private var rank: Int { Self.allCases.firstIndex(of: self)! }
        static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }

        /// `--log-level`'s spelling: debug, info, warn (or warning), error.
        init?(option: String) {
            switch option.lowercased() {
            case "debug": self = .debug
            case "info": self = .info
            case "warn", "warning": self = .warning
            case "error": self = .error
            default: return nil
            }
        }
    }

    /// Where lines go when injected (tests); nil when they go to `writer`.
    private let sink: (@Sendable (String) -> Void)?
    private let writer: LogWriter?
    let minimumLevel: Level
    let format: LogFormat

    /// Lines go to stderr through `writer`'s thread.
    init(writer: LogWriter, minimumLevel: Level = .info, format: LogFormat = .json) {
        self.writer = writer
        self.sink = nil
        self.minimumLevel = minimumLevel
        self.format = format
    }

    /// Lines go to `sink`, one call per line, on the logging thread.
    init(sink: @escaping @Sendable (String) -> Void, minimumLevel: Level = .info, format: LogFormat = .json) {
        self.writer = nil
        self.sink = sink
        self.minimumLevel = minimumLevel
        self.format = format
    }

    /// Waits (bounded) until the lines logged so far are written; call before `exit`.
    func flush() { writer?.flush() }

    func log(_ level: Level, _ message: String, _ fields: [String: Any] = [:], at date: Date = Date()) {
        write(level, message, fields, at: date, reserved: false)
    }

    /// One step of a download's story (`StoryLine`): never dropped by the writer's bound (it has a
    /// reserve of its own), still filtered by level.
    func story(_ story: DownloadStory, at date: Date = Date()) {
        let line = StoryLine.render(story)
        write(line.level, line.message, line.fields, at: date, reserved: true, leading: StoryLine.fixedKeys)
    }

    private func write(_ level: Level, _ message: String, _ fields: [String: Any], at date: Date, reserved: Bool,
                       leading: [String] = []) {
        guard level >= minimumLevel else { return }
        if format == .text {
            emit(Array(LogText.line(timestamp: JSON.timestamp(date), level: level.rawValue, message: message, fields: fields,
                                    leading: leading).utf8), reserved: reserved)
            return
        }
        var object = fields
        object["ts"] = JSON.timestamp(date)
        object["level"] = level.rawValue
        object["msg"] = message
        emit(JSON.bytes(object), reserved: reserved)
    }

    private func emit(_ line: some Collection<UInt8>, reserved: Bool = false) {
        if let writer { writer.append(line, reserved: reserved) } else { sink?(String(decoding: line, as: UTF8.self)) }
    }

    /// The access-log line of one request: the same JSON as `info("request", …)` with its fields,
    /// written directly because it runs for every request (a dictionary of `Any` costs casts).
    func request(_ entry: AccessLogEntry, at date: Date = Date()) {
        guard minimumLevel <= .info else { return }
        var entry = entry
        entry.path = LoggedPath.shown(method: entry.method, path: entry.path)
        if format == .text {
            var fields: [String: Any] = ["bytes": entry.bytes, "durationMs": Self.milliseconds(entry.durationSeconds),
                                         "method": entry.method, "path": entry.path, "remote": entry.remoteAddress,
                                         "status": entry.status]
            if let aborted = entry.aborted { fields["aborted"] = aborted }
            log(.info, "request", fields, at: date)
            return
        }
        // Built on the stack (no array, no reference counting); a line too long for 1 KiB (a long
        // path, many escapes) is built again in an array.
        let written: Bool = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { buffer in
            var out = FixedBytes(buffer)
            Self.writeRequestLine(entry, at: date, into: &out)
            guard !out.overflowed else { return false }
            emit(out.written)
            return true
        }
        if !written {
            var out: [UInt8] = []
            Self.writeRequestLine(entry, at: date, into: &out)
            emit(out)
        }
    }

    private static func writeRequestLine<Out: JSONOutput>(_ entry: AccessLogEntry, at date: Date, into out: inout Out) {
        if let aborted = entry.aborted {
            JSON.writeLiteral(#"{"aborted":"#, into: &out)
            JSON.writeString(aborted, into: &out)
            JSON.writeLiteral(#","bytes":"#, into: &out)
        } else {
            JSON.writeLiteral(#"{"bytes":"#, into: &out)
        }
        JSON.writeInteger(entry.bytes, into: &out)
        JSON.writeLiteral(#","durationMs":"#, into: &out)
        JSON.writeDouble(Self.milliseconds(entry.durationSeconds), into: &out)
        JSON.writeLiteral(#","level":"info","method":"#, into: &out)
        JSON.writeString(entry.method, into: &out)
        JSON.writeLiteral(#","msg":"request","path":"#, into: &out)
        JSON.writeString(entry.path, into: &out)
        JSON.writeLiteral(#","remote":"#, into: &out)
        JSON.writeString(entry.remoteAddress, into: &out)
        JSON.writeLiteral(#","status":"#, into: &out)
        JSON.writeInteger(Int64(entry.status), into: &out)
        JSON.writeLiteral(#","ts":""#, into: &out)
        JSON.writeTimestamp(date, into: &out)
        JSON.writeLiteral(#""}"#, into: &out)
    }

    /// Seconds as milliseconds with microsecond precision.
    static func milliseconds(_ seconds: Double) -> Double { (seconds * 1_000_000).rounded() / 1000 }

    func debug(_ message: String, _ fields: [String: Any] = [:]) { log(.debug, message, fields) }
    func info(_ message: String, _ fields: [String: Any] = [:]) { log(.info, message, fields) }
    func warning(_ message: String, _ fields: [String: Any] = [:]) { log(.warning, message, fields) }
    func error(_ message: String, _ fields: [String: Any] = [:]) { log(.error, message, fields) }
}
