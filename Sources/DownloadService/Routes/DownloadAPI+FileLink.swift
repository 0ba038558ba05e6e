import Foundation
import MiniHTTPServer

// `GET /downloads/{id}/file-link`, and the links it gives standing for a token on the file route.
extension DownloadAPI {
    /// `{"url": <the link>, "expiresAt": <when it stops opening the file>}`, never cached.
    func fileLink(id: String) -> Response {
        guard engine.snapshot(id: id) != nil else { return unknownDownloadResponse(id) }
        let link = fileLinks.path(id: id, now: Date().timeIntervalSince1970)
        var body = JSONObject()
        body.append("expiresAt", .string(JSON.timestamp(Date(timeIntervalSince1970: Double(link.expires)))))
        body.append("url", .string(link.path))
        return .json(body.bytes, headers: ["Cache-Control": "no-store"])
    }

    /// Whether `request` is a `GET` or `HEAD` of a file by a live link to it (`FileLink`).
    func isLiveFileLink(_ endpoint: Endpoint, _ request: Request) -> Bool {
        guard case .file(let id) = endpoint, request.method == "GET" || request.method == "HEAD", request.query != nil else { return false }
        let items = request.queryItems
        return fileLinks.admits(id: id, expires: items.first { $0.name == "expires" }?.value,
                                signature: items.first { $0.name == "signature" }?.value, now: Date().timeIntervalSince1970)
    }
}
