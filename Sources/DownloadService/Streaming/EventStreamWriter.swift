import DownloaderEngine
import MiniHTTPServer

/// Writes a subscription's events to one progress stream as Server-Sent Events: ids from `firstID`
/// up, `retry:` on the first, the stream ends after a terminal event. The `data:` of an event is
/// encoded once for all streams (`EventDataCache`); each stream only adds its `id:` line.
struct EventStreamWriter: Sendable {
    let writer: any ResponseBodyWriter
    let firstID: UInt64
    let eventData: EventDataCache

    /// Forwards events until the subscription ends or a terminal event has been written.
    func forward(_ subscription: DownloadSubscription) async throws {
        var nextID = firstID
        for await event in subscription {
            let data = eventData.data(for: event, encode: DownloadAPI.eventData)
            try await writer.write(Self.frame(id: nextID, event: DownloadAPI.eventName(event), data: data,
                                              retryMilliseconds: nextID == firstID ? DownloadAPI.retryMilliseconds : nil))
            nextID &+= 1
            if event.isTerminal { break }
        }
    }

    /// One event's bytes, identical to `ServerSentEvent.encoded`, built straight into one buffer
    /// for the usual single-line `data` (a multi-line one goes through `ServerSentEvent`).
    static func frame(id: UInt64, event: String, data: String, retryMilliseconds: Int?) -> [UInt8] {
        let plain = !data.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) && !event.utf8.contains(0x0D)
        guard plain else {
            var sse = ServerSentEvent(id: id, event: event, data: data)
            sse.retryMilliseconds = retryMilliseconds
            return Array(sse.encoded.utf8)
        }
        var out: [UInt8] = []
        out.reserveCapacity(data.utf8.count + event.utf8.count + 48)
        if let retryMilliseconds {
            out.append(contentsOf: "retry: ".utf8)
            out.append(contentsOf: String(retryMilliseconds).utf8)
            out.append(0x0A)
        }
        out.append(contentsOf: "id: ".utf8)
        out.append(contentsOf: String(id).utf8)
        out.append(contentsOf: "\nevent: ".utf8)
        out.append(contentsOf: event.utf8)
        out.append(contentsOf: "\ndata: ".utf8)
        out.append(contentsOf: data.utf8)
        out.append(contentsOf: "\n\n".utf8)
        return out
    }
}
