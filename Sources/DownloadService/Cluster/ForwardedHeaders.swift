import Foundation
import MiniHTTPServer

/// Which header fields travel when a request is forwarded to the replica holding its download, and
/// back with the answer. Pure (`ForwardedHeadersTests` is its table).
///
/// Towards the holder only the fields that change its answer pass (an allow list: credentials for
/// its own auth check, the body's type, ranges and validators, the event id to resume from, the
/// caller token of a private download), plus `marker`, so that the holder never forwards the
/// request again. Back from it everything passes except hop-by-hop fields (RFC 9110 §7.6.1: the
/// standard ones and any named in its `Connection`) and the framing and date this server writes
/// itself.
enum ForwardedHeaders {
    /// Marks a forwarded request; its value names the replica that forwarded it ("1" when unknown).
    static let marker = "X-Download-Service-Forwarded"
    /// Marks the refusal of a second hop (the replica a request was forwarded to does not hold the
    /// download any more): the replica that forwarded it asks again where the download lives.
    static let hopRefused = "X-Download-Service-Hop-Refused"

    /// Request fields passed on to the holder.
    static let passed = [
        "Authorization", "Content-Type", "Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match",
        "If-Unmodified-Since", "Last-Event-ID", "Accept", "X-Caller-Token",
    ]

    /// Hop-by-hop fields: meaningful for one connection only, never relayed.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
        "trailer", "transfer-encoding", "upgrade",
    ]

    /// Answer fields this server writes itself (framing, date).
    static let serverOwned: Set<String> = ["content-length", "date"]

    /// Whether `headers` come with a request another replica forwarded.
    static func isForwarded(_ headers: HTTPHeaders) -> Bool {
        headers.contains(marker)
    }

    /// The fields to send to the holder, in the request's order, then the marker (and the signed
    /// client address, `ClientSigning`, when there is one).
    static func request(_ headers: HTTPHeaders, forwardedBy replica: String?, client: String? = nil) -> [(name: String, value: String)] {
        let allowed = Set(passed.map { $0.lowercased() })
        var fields = headers.fields.filter { allowed.contains($0.name.lowercased()) && isSafe($0.value) }
        fields.append((name: marker, value: replica.flatMap { isSafe($0) && !$0.isEmpty ? $0 : nil } ?? "1"))
        if let client, isSafe(client) { fields.append((name: ClientSigning.field, value: client)) }
        return fields
    }

    /// The holder's answer fields as relayed to the client.
    static func response(_ fields: [(name: String, value: String)]) -> HTTPHeaders {
        var dropped = hopByHop.union(serverOwned)
        for field in fields where field.name.lowercased() == "connection" {
            for token in field.value.split(separator: ",") {
                dropped.insert(token.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        return HTTPHeaders(fields.filter { !dropped.contains($0.name.lowercased()) && isSafe($0.value) })
    }

    /// The answer's `Content-Length`, when it has exactly one valid value.
    static func contentLength(_ fields: [(name: String, value: String)]) -> Int64? {
        let values = fields.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        guard values.count == 1, let text = values.first?.trimmingCharacters(in: .whitespaces),
              !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let length = Int64(text) else { return nil }
        return length
    }

    /// The URL of `target` (path and query, as the client sent them) on the replica at `ownerURL`.
    static func url(ownerURL: String, target: String) -> String {
        var base = Substring(ownerURL)
        while base.hasSuffix("/") { base = base.dropLast() }
        return String(base) + (target.hasPrefix("/") ? target : "/" + target)
    }

    /// No CR, LF or NUL: a value that cannot split a head.
    private static func isSafe(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    }
}
