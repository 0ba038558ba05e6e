import DownloaderEngine
import Foundation
import MiniHTTPServer

/// `GET /downloads/{id}/progress`: the download's events as Server-Sent Events.
///
/// The first event is a `progress` event with the current snapshot (or, for a download that has
/// ended, its `completed`/`failed` event, after which the stream ends). Event ids are decimal and
/// strictly increasing, continuing after a client's `Last-Event-ID`. A `: keep-alive` comment goes
/// out once a stream has been quiet for `keepAliveInterval` seconds, so that idle streams stay open
/// and dead clients are noticed (written by the server on its own timers). The stream is a push
/// body fed by the connection's event loop: no task per stream.
extension DownloadAPI {
    /// Reconnection delay suggested to clients, in milliseconds.
    static let retryMilliseconds = 2000
    /// Reconnection delay on a terminal event (the stream ends after it): an hour, so that an
    /// `EventSource` nobody closed does not fetch the same end again every 2 s.
    static let endedRetryMilliseconds = 3_600_000

    func progress(id: String, request: Request) -> Response {
        let headers: HTTPHeaders = [
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        ]
        if request.method == "HEAD" {
            // The head a GET gets: a stream of unknown length (chunked), not an empty body, or the
            // refusal at the limit (a HEAD takes no place).
            guard engine.snapshot(id: id) != nil else { return unknownDownloadResponse(id) }
            guard subscriberQuota.hasRoom(id) else {
                return APIError.tooManySubscribers(limit: subscriberQuota.limit).response
            }
            return Response(headers: headers, body: .push(PushBody(length: nil, source: HeadOnly())))
        }
        guard let lease = subscriberQuota.acquire(id) else {
            return APIError.tooManySubscribers(limit: subscriberQuota.limit).response
        }
        guard let subscription = engine.subscribe(id: id) else { return unknownDownloadResponse(id) }
        let firstID = Self.firstEventID(after: request.headers["Last-Event-ID"])
        let source = EventStreamSource(subscription: subscription, firstID: firstID, eventData: eventData, lease: lease,
                                       keepAlive: (Array(ServerSentEvent.comment("keep-alive").utf8), keepAliveInterval))
        return Response(headers: headers, body: .push(PushBody(source: source)))
    }

    /// The id of a stream's first event: one past a reconnecting client's `Last-Event-ID`, so ids
    /// keep increasing across its reconnects; 1 for a first connection, and for an id that is not
    /// a number this stream could have sent (ids never come near 2^53).
    static func firstEventID(after lastEventID: String?) -> UInt64 {
        guard let last = lastEventID.flatMap({ UInt64($0.trimmingCharacters(in: .whitespaces)) }), last < 1 << 53 else { return 1 }
        return last + 1
    }

    /// The SSE form of an engine event: its name, and the snapshot (plus offset/restarted) as data.
    static func serverSentEvent(for event: DownloadEvent, id: UInt64) -> ServerSentEvent {
        ServerSentEvent(id: id, event: eventName(event), data: eventData(event))
    }

    static func eventName(_ event: DownloadEvent) -> String {
        switch event {
        case .progress: "progress"
        case .resumed: "resumed"
        case .paused: "paused"
        case .completed: "completed"
        case .failed: "failed"
        case .removed: "removed"
        }
    }

    /// The snapshot as JSON, plus `offset` and `restarted` for a resume, `by` for a pause
    /// (`operator` or `callers`) and for a removal (`operator` or `retention`, with `state` `removed`).
    static func eventData(_ event: DownloadEvent) -> String {
        var data = SnapshotJSON.object(event.snapshot)
        switch event {
        case .resumed(let offset, let restarted, _):
            data["offset"] = .int(offset)
            data["restarted"] = .bool(restarted)
        case .paused(let snapshot):
            data["by"] = .string((snapshot.pausedBy ?? .callers).rawValue)
        case .removed(let by, _):
            data["by"] = .string(by.rawValue)
            data["state"] = .string("removed")
        case .progress, .completed, .failed:
            break
        }
        return JSONValue.object(data).string
    }

    func unknownDownloadResponse(_ id: String) -> Response {
        APIError.notFound("no download with id \(id)").response
    }
}
