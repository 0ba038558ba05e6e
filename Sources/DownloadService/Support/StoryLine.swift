import DownloaderEngine

/// The log line of one step of a download's story (`DownloadStory`). Pure. Every line has the
/// fixed keys `event`, `id` and `url` (credentials redacted), then the event's own fields; a
/// missing value is `null`, so each event always has the same keys. Levels: `retry_scheduled` and
/// `move_failed` are warnings, `failed` an error, every other step info.
enum StoryLine {
    /// The keys every story line starts with (text lines show them first, in this order).
    static let fixedKeys = ["event", "id", "url"]

    static func render(_ story: DownloadStory) -> (level: Logger.Level, message: String, fields: [String: Any]) {
        let (name, level, fields) = describe(story.event)
        var all = fields.mapValues(bounded)
        all["event"] = name
        all["id"] = story.id
        all["url"] = URLCredentials.redacted(story.url)
        return (level, "download " + name.replacingOccurrences(of: "_", with: " "), all)
    }

    private static func describe(_ event: DownloadStory.Event) -> (String, Logger.Level, [String: Any]) {
        switch event {
        case .created(let storage, let client, let by):
            return ("created", .info, ["storage": storage.rawValue, "client": JSON.orNull(client), "by": by.rawValue])
        case .joined(let client, let by, let state, let callers):
            return ("joined", .info, ["client": JSON.orNull(client), "by": by.rawValue, "state": state.rawValue, "callers": callers])
        case .resumed(let client, let by, let from, let offset):
            return ("resumed", .info, ["client": JSON.orNull(client), "by": by.rawValue, "from": from.rawValue, "offset": offset,
                                       "restart": offset == 0])
        case .attemptStarted(let attempt, let offset, let range, let ifRange):
            return ("attempt_started", .info, ["attempt": attempt, "offset": offset, "range": JSON.orNull(range),
                                               "ifRange": JSON.orNull(ifRange)])
        case .headReceived(let attempt, let status, let size, let validator, let outcome):
            var fields: [String: Any] = ["attempt": attempt, "status": status, "size": JSON.orNull(size),
                                         "validator": validator.rawValue]
            switch outcome {
            case .body(let offset, let restarted):
                fields.merge(["accepted": true, "offset": offset, "restarted": restarted, "refused": JSON.orNull(nil)]) { $1 }
            case .refused(let why):
                fields.merge(["accepted": false, "offset": JSON.orNull(nil), "restarted": false, "refused": why]) { $1 }
            }
            return ("head_received", .info, fields)
        case .retryScheduled(let attempt, let trouble, let delay, let offset):
            return ("retry_scheduled", .warning, ["attempt": attempt, "cause": trouble.cause, "message": trouble.message,
                                                  "httpStatus": JSON.orNull(trouble.httpStatus), "delaySeconds": seconds(delay),
                                                  "offset": offset])
        case .connectionsDecided(let attempt, let connections, let alone, let probed):
            return ("connections_decided", .info, ["attempt": attempt, "connections": connections,
                                                   "aloneBytesPerSecond": Int64(alone.rounded()),
                                                   "probedBytesPerSecond": JSON.orNull(probed.map { Int64($0.rounded()) })])
        case .paused(let reason, let keptBytes):
            return ("paused", .info, ["reason": reason.rawValue, "keptBytes": keptBytes])
        case .completed(let size, let sha256, let duration, let rate, let attempts, let refetched):
            return ("completed", .info, ["size": size, "sha256": sha256, "durationSeconds": seconds(duration),
                                         "bytesPerSecond": Int64(rate.rounded()), "attempts": attempts, "refetchedBytes": refetched])
        case .failed(let code, let message, let httpStatus, let attempts):
            return ("failed", .error, ["code": code.rawValue, "message": message, "httpStatus": JSON.orNull(httpStatus),
                                       "attempts": attempts])
        case .purged(let kind, let reason, let bytes):
            return ("purged", .info, ["kind": kind.rawValue, "reason": reason.rawValue, "bytes": bytes])
        case .moved(let storage, let path):
            return ("moved", .info, ["storage": storage.rawValue, "path": path])
        case .moveFailed(let storage, let error):
            return ("move_failed", .warning, ["storage": storage.rawValue, "error": error])
        case .recovered(let state, let keptBytes, let callers):
            return ("recovered", .info, ["state": state.rawValue, "keptBytes": keptBytes, "callers": callers])
        case .stopped(let bytesWritten):
            return ("stopped", .info, ["bytesWritten": bytesWritten])
        case .released(let callers):
            return ("released", .info, ["callers": callers])
        case .removed(let by):
            return ("removed", .info, ["by": by.rawValue])
        }
    }

    /// A step's text field from the origin (a validator, a message, a reason) is kept to
    /// `maxFieldBytes`: an origin's 60 KiB ETag is in every `attempt_started` line, and 30 such
    /// lines would fill the log's reserve for story lines.
    static func bounded(_ value: Any) -> Any {
        guard let text = value as? String, text.utf8.count > maxFieldBytes else { return value }
        var cut = text.utf8.prefix(maxFieldBytes)
        while !cut.isEmpty, String(cut) == nil { cut = cut.dropLast() }  // never half a character
        return (String(cut) ?? "") + "… (\(text.utf8.count) bytes)"
    }

    static let maxFieldBytes = 1_024

    /// Seconds with millisecond precision.
    static func seconds(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}
