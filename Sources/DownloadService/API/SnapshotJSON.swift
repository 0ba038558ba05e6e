import DownloaderEngine
import Foundation

/// The API's JSON view of a download. Unknown values are explicit `null`s, never missing keys.
enum SnapshotJSON {
    static func object(_ s: DownloadSnapshot) -> [String: Any] {
        var o: [String: Any] = [
            "id": s.id,
            "url": URLRedaction.redactingCredentials(s.url),
            "state": s.state.rawValue,
            "storage": s.storage.rawValue,
            "bytesWritten": s.bytesWritten,
            "bytesExpected": JSON.orNull(s.bytesExpected),
            "fraction": JSON.orNull(s.fraction.map(rounded)),
            "bytesPerSecond": rounded(s.bytesPerSecond),
            "etaSeconds": JSON.orNull(s.etaSeconds.map(rounded)),
            "callers": s.callers,
            "resumable": s.resumable,
            "createdAt": JSON.timestamp(s.createdAt),
            "updatedAt": JSON.timestamp(s.updatedAt),
            "links": links(id: s.id),
        ]
        if s.state == .completed {
            o["sha256"] = JSON.orNull(s.sha256)
            o["size"] = JSON.orNull(s.size)
            o["path"] = JSON.orNull(s.path)
            o["fileName"] = JSON.orNull(s.fileName)
        }
        if let e = s.error {
            var error: [String: Any] = ["code": e.code, "message": e.message]
            if let status = e.httpStatus { error["httpStatus"] = status }
            o["error"] = error
        }
        return o
    }

    /// The body of a `POST /downloads` answer: the snapshot plus the caller's token and links.
    static func enqueued(_ e: Enqueued) -> [String: Any] {
        var o = object(e.snapshot)
        o["token"] = e.token
        o["coalesced"] = e.coalesced
        o["links"] = links(id: e.snapshot.id, token: e.token)
        return o
    }

    static func links(id: String, token: String? = nil) -> [String: Any] {
        var l: [String: Any] = [
            "self": "/downloads/\(id)",
            "progress": "/downloads/\(id)/progress",
            "file": "/downloads/\(id)/file",
        ]
        if let token { l["cancel"] = "/downloads/\(token)" }
        return l
    }

    /// Three decimals are plenty for rates, fractions and ETAs, and keep the JSON short.
    private static func rounded(_ d: Double) -> Double {
        d.isFinite ? (d * 1000).rounded() / 1000 : 0
    }
}
