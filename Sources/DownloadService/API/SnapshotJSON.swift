import DownloaderEngine
import Foundation

/// The API's JSON view of a download. Unknown values are explicit `null`s, never missing keys.
/// Members are set in key order, so writing them needs no sort.
enum SnapshotJSON {
    static func object(_ s: DownloadSnapshot) -> JSONObject {
        let completed = s.state == .completed
        var o = JSONObject()
        o["bytesExpected"] = .int(s.bytesExpected)
        o["bytesPerSecond"] = .double(rounded(s.bytesPerSecond))
        o["bytesWritten"] = .int(s.bytesWritten)
        o["callers"] = .int(Int64(s.callers))
        o["createdAt"] = .string(JSON.timestamp(s.createdAt))
        if let e = s.error {
            var error = JSONObject()
            error["code"] = .string(e.code)
            error["httpStatus"] = e.httpStatus.map { .int(Int64($0)) }
            error["message"] = .string(e.message)
            o["error"] = .object(error)
        }
        o["etaSeconds"] = .double(s.etaSeconds.map(rounded))
        if completed { o["fileName"] = .string(s.fileName) }
        o["fraction"] = .double(s.fraction.map(rounded))
        o["id"] = .string(s.id)
        o["links"] = .object(links(id: s.id))
        if completed { o["path"] = .string(s.path) }
        o["resumable"] = .bool(s.resumable)
        if completed {
            o["sha256"] = .string(s.sha256)
            o["size"] = .int(s.size)
        }
        o["state"] = .string(s.state.rawValue)
        o["storage"] = .string(s.storage.rawValue)
        o["updatedAt"] = .string(JSON.timestamp(s.updatedAt))
        o["url"] = .string(URLRedaction.redactingCredentials(s.url))
        return o
    }

    /// The body of a `POST /downloads` answer: the snapshot plus the caller's token and links.
    static func enqueued(_ e: Enqueued) -> JSONObject {
        var o = object(e.snapshot)
        o["coalesced"] = .bool(e.coalesced)
        o["links"] = .object(links(id: e.snapshot.id, token: e.token))
        o["token"] = .string(e.token)
        return o
    }

    static func links(id: String, token: String? = nil) -> JSONObject {
        var l = JSONObject()
        if let token { l["cancel"] = .string("/downloads/\(token)") }
        l["file"] = .string("/downloads/\(id)/file")
        l["progress"] = .string("/downloads/\(id)/progress")
        l["self"] = .string("/downloads/\(id)")
        return l
    }

    /// Three decimals are plenty for rates, fractions and ETAs, and keep the JSON short.
    private static func rounded(_ d: Double) -> Double {
        d.isFinite ? (d * 1000).rounded() / 1000 : 0
    }
}
