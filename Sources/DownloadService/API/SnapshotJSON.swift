import DownloaderEngine
import Foundation

/// The API's JSON view of a download. Unknown values are explicit `null`s, never missing keys.
/// Members are appended in key order, so writing them needs no sort.
enum SnapshotJSON {
    static func object(_ s: DownloadSnapshot) -> JSONObject {
        let completed = s.state == .completed
        var o = JSONObject()
        o.append("bytesExpected", .int(s.bytesExpected))
        o.append("bytesPerSecond", .double(rounded(s.bytesPerSecond)))
        o.append("bytesWritten", .int(s.bytesWritten))
        o.append("callers", .int(Int64(s.callers)))
        if let changed = s.changedAt { o.append("changedAt", .string(JSON.timestamp(changed))) }
        if let c = s.connections {  // Segmented fetch: only once a caller asked for more than one.
            var connections = JSONObject()
            connections.append("active", .int(Int64(c.active)))
            connections.append("granted", .int(Int64(c.granted)))
            connections.append("requested", .int(Int64(c.requested)))
            o.append("connections", .object(connections))
        }
        o.append("createdAt", .string(JSON.timestamp(s.createdAt)))
        if let e = s.error {
            var error = JSONObject()
            error.append("code", .string(e.code.rawValue))
            error.append("httpStatus", e.httpStatus.map { .int(Int64($0)) })
            error.append("message", .string(e.message))
            o.append("error", .object(error))
        }
        o.append("etaSeconds", .double(s.etaSeconds.map(rounded)))
        if completed { o.append("fileName", .string(s.fileName)) }
        o.append("fraction", .double(s.fraction.map(rounded)))
        o.append("id", .string(s.id))
        o.append("links", .object(links(id: s.id)))
        if completed { o.append("path", .string(s.path)) }
        if let reason = s.reason { o.append("reason", .string(reason)) }
        if let by = s.pausedBy { o.append("pausedBy", .string(by.rawValue)) }
        o.append("resumable", .bool(s.resumable))
        if completed {
            o.append("sha256", .string(s.sha256))
            o.append("size", .int(s.size))
        }
        o.append("state", .string(s.state.rawValue))
        o.append("storage", .string(s.storage.rawValue))
        o.append("updatedAt", .string(JSON.timestamp(s.updatedAt)))
        o.append("url", .string(URLCredentials.redacted(s.url)))
        return o
    }

    /// The body of a `POST /downloads` answer: the snapshot plus the caller's token and links.
    static func enqueued(_ e: Enqueued) -> JSONObject {
        var o = object(e.snapshot)
        o["coalesced"] = .bool(e.coalesced)
        o["links"] = .object(links(id: e.snapshot.id, token: e.token))
        o["reused"] = .bool(e.reused)
        o["token"] = .string(e.token)
        return o
    }

    static func links(id: String, token: String? = nil) -> JSONObject {
        var l = JSONObject()
        if let token { l.append("cancel", .string("/downloads/\(token)")) }
        l.append("file", .string("/downloads/\(id)/file"))
        l.append("progress", .string("/downloads/\(id)/progress"))
        l.append("self", .string("/downloads/\(id)"))
        return l
    }

    /// Three decimals are plenty for rates, fractions and ETAs, and keep the JSON short.
    private static func rounded(_ d: Double) -> Double {
        d.isFinite ? (d * 1000).rounded() / 1000 : 0
    }
}
