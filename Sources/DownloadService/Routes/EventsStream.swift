import DownloaderEngine
import Foundation
import MiniHTTPServer

/// `GET /events`: every download's events as one Server-Sent Events stream (`DownloadEngine.watchAll`).
///
/// A fresh stream starts with one `snapshot` event per download (oldest first); then `created`,
/// `resumed`, `paused`, `completed`, `failed` (and whatever else the engine tells per-download
/// subscribers) as they happen, and `progress`, the newest per download, paced by the budget the
/// per-download streams share. The `data` of each is the download's snapshot. Ids are decimal and
/// strictly increasing, also across restarts; a `Last-Event-ID` inside the history (the last 10 000
/// lifecycle events of this run) continues right after it, with no snapshot. At most
/// `--max-event-subscribers` streams at once (then 503), and a fresh one only while the snapshots
/// earlier streams have not sent yet (a client that does not read keeps all of its own) leave room
/// for its own under `EventFeed.snapshotBudget` items (then 503; never the operator's).
/// `EventSource` cannot send headers: the token may come as `?access_token=` (never logged: the
/// access log shows the path alone).
/// Private downloads (made with `headers`) are shown to the operator only, like in `GET /downloads`.
extension DownloadAPI {
    func events(_ request: Request) -> Response {
        let headers: HTTPHeaders = [
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        ]
        // The operator's streams count apart: callers holding every place never lock the operator out.
        let showsPrivate = isOperator(request, endpoint: .events)
        let place = showsPrivate ? "operator" : ""
        let refused = { (why: String) in
            APIError(status: 503, .tooManySubscribers, "\(why); retry later", headers: ["Retry-After": "5"]).response
        }
        let full = "\(eventSubscriberQuota.limit) event streams are open already"
        if request.method == "HEAD" {  // The head a GET gets (a HEAD takes no place).
            guard eventSubscriberQuota.hasRoom(place) else { return refused(full) }
            return Response(headers: headers, body: .push(PushBody(length: nil, source: HeadOnly())))
        }
        guard let lease = eventSubscriberQuota.acquire(place) else { return refused(full) }
        let lastID = request.headers["Last-Event-ID"].flatMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
        guard let subscription = engine.watchAll(after: lastID, exempt: showsPrivate) else {
            return refused("the event streams open hold as many snapshots not yet read as this service keeps")
        }
        let source = FeedStreamSource(subscription: subscription, eventData: eventData, lease: lease,
                                      keepAlive: (Array(ServerSentEvent.comment("keep-alive").utf8), keepAliveInterval),
                                      showsPrivate: showsPrivate)
        return Response(headers: headers, body: .push(PushBody(source: source)))
    }

    /// The SSE name and data of a feed item.
    static func feedEvent(_ kind: FeedItem.Kind, eventData: EventDataCache) -> (name: String, data: String) {
        switch kind {
        case .snapshot(let s): ("snapshot", JSONValue.object(SnapshotJSON.object(s)).string)
        case .created(let s): ("created", JSONValue.object(SnapshotJSON.object(s)).string)
        case .event(let event): (eventName(event), eventData.data(for: event, encode: DownloadAPI.eventData))
        }
    }
}

/// Where `GET /events` and `/downloads/{id}/file` (the page's "open" links) take a token from when
/// no `Authorization` header came: `access_token` in the query (RFC 6750 §2.3). Only for those
/// reads; everything else needs the header.
enum QueryToken {
    static func authorization(for endpoint: Endpoint, _ request: Request) -> String? {
        if let header = request.headers["Authorization"] { return header }
        switch endpoint {
        case .events, .file: break
        default: return nil
        }
        guard request.method == "GET" || request.method == "HEAD", request.query != nil,
              let token = request.queryItems.first(where: { $0.name == "access_token" })?.value, !token.isEmpty else { return nil }
        return "Bearer " + token
    }
}
