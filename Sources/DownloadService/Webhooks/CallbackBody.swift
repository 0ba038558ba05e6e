import DownloaderEngine
import Foundation

/// The `callback` member of a `POST /downloads` body: `{"url": "https://…", "events"?: ["completed",
/// "failed"]}` (events default to both), or absent/null. Pure; checks shape only: whether the host
/// may be called is the SSRF guard's call (`WebhookDispatcher.screen`).
enum CallbackBody {
    /// Longest callback URL accepted, in bytes.
    static let maxURLBytes = 2048

    static func parse(_ body: [UInt8]) -> Result<CallbackRequest?, APIError> {
        parse(object: (try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])) ?? NSNull())
    }

    /// The callback of a body already parsed (`CreateDownloadBody.parseWithObject`).
    static func parse(object: Any) -> Result<CallbackRequest?, APIError> {
        guard let object = object as? [String: Any],
              let value = object["callback"], !(value is NSNull) else { return .success(nil) }
        func invalid(_ message: String) -> Result<CallbackRequest?, APIError> {
            .failure(.badRequest(.invalidCallback, message))
        }
        guard let callback = value as? [String: Any] else {
            return invalid(#""callback" must be an object {"url", "events"}"#)
        }
        if let extra = callback.keys.sorted().first(where: { $0 != "url" && $0 != "events" }) {
            return invalid(#""callback" has an unknown member "\#(extra)" (known: "url", "events")"#)
        }
        guard let url = callback["url"] as? String else { return invalid(#""callback.url" is required and must be a string"#) }
        guard url.utf8.count <= maxURLBytes else { return invalid(#""callback.url" is longer than \#(maxURLBytes) bytes"#) }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.percentEncodedHost, !host.isEmpty,
              !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }) else {
            return invalid(#""callback.url" must be an absolute http or https URL with a host"#)
        }
        guard components.percentEncodedUser == nil, components.percentEncodedPassword == nil else {
            return invalid(#""callback.url" must not carry user:password@ (put a token in its path or query)"#)
        }
        var events = Set(WebhookEvent.allCases)
        if let raw = callback["events"], !(raw is NSNull) {
            let names = WebhookEvent.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            guard let list = raw as? [Any], !list.isEmpty, list.count <= WebhookEvent.allCases.count * 2 else {
                return invalid(#""callback.events" must be a non-empty array of \#(names)"#)
            }
            events = []
            for item in list {
                guard let name = item as? String, let event = WebhookEvent(rawValue: name) else {
                    return invalid(#""callback.events" may hold only \#(names)"#)
                }
                events.insert(event)
            }
        }
        return .success(CallbackRequest(url: url, events: events))
    }
}
