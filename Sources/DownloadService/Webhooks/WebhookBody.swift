import DownloaderEngine

/// The JSON a callback receives: `{"deliveryId", "download": <snapshot as GET /downloads/{id}
/// answers it>, "event"}` (members in key order, like every answer). Pure.
enum WebhookBody {
    static func render(event: WebhookEvent, deliveryID: String, snapshot: DownloadSnapshot) -> [UInt8] {
        var o = JSONObject()
        o.append("deliveryId", .string(deliveryID))
        o.append("download", .object(SnapshotJSON.object(snapshot)))
        o.append("event", .string(event.rawValue))
        return o.bytes
    }

    /// How a caller's callback shows in the `POST /downloads` answer: its URL as scheme and host only.
    static func shown(_ callback: CallbackRequest) -> JSONValue {
        var o = JSONObject()
        o.append("events", .array(callback.events.sorted().map { .string($0.rawValue) }))
        o.append("url", .string(CallbackRequest.shown(callback.url)))
        return .object(o)
    }
}
