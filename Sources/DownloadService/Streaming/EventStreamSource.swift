import DownloaderEngine
import Foundation
import MiniHTTPServer

/// One progress stream's body: the subscription's events as Server-Sent Events (see
/// `EventStreamCursor` for what is written), fed by the connection's event loop (`PushSource`): no
/// task per stream, so an idle stream costs its queue and its cursor. While the connection's
/// output is above its high watermark the stream takes nothing (progress is conflated meanwhile).
final class EventStreamSource: PushSource, @unchecked Sendable {
    private let subscription: DownloadSubscription
    private let eventData: EventDataCache
    /// The stream's place under `--max-subscribers-per-download`, held until the stream ends.
    private var lease: SubscriberQuota.Lease?
    private let keepAlive: (comment: [UInt8], seconds: Double)?
    // Loop thread only.
    private var cursor: EventStreamCursor
    private var started = false
    /// Made once (a closure and a weak reference per poll showed in the fan-out profile).
    private var waker: (@Sendable () -> Void)?

    init(subscription: DownloadSubscription, firstID: UInt64, eventData: EventDataCache, lease: SubscriberQuota.Lease?,
         keepAlive: (comment: [UInt8], seconds: Double)?) {
        self.subscription = subscription
        self.eventData = eventData
        self.lease = lease
        self.keepAlive = keepAlive
        cursor = EventStreamCursor(firstID: firstID)
    }

    func produce(_ stream: PushStream) {
        if !started {
            started = true
            if let keepAlive { stream.setIdleHeartbeat(keepAlive.comment, after: keepAlive.seconds) }
            waker = { [weak stream] in stream?.wake() }
        }
        guard let waker else { return }
        // What is pending goes out in one write (one chunk, one send): a lifecycle event and the
        // progress after it, say, for a stream that ran late.
        var batch: [UInt8] = []
        defer { stream.write(batch) }  // Writing nothing is a no-op.
        while stream.hasRoom {
            switch subscription.poll(waker: waker) {
            case .wait:
                return
            case .end:
                stream.write(batch)
                batch = []
                stream.finish()
                return
            case .event(let event):
                guard let frame = cursor.frame(for: event, eventData: eventData) else { continue }
                if batch.isEmpty { batch = frame } else { batch.append(contentsOf: frame) }
                if cursor.ended {
                    stream.write(batch)
                    batch = []
                    stream.finish()
                    return
                }
                if batch.count >= Self.batchBytes {
                    stream.write(batch)
                    batch = []
                }
            }
        }
    }

    /// A batch is written once it holds this many bytes (the queue above the high watermark stops
    /// the loop anyway, but `hasRoom` only sees what was written).
    static let batchBytes = 16 << 10

    func ended(_ stream: PushStream, completed: Bool) {
        subscription.cancel()
        lease = nil
        waker = nil
    }
}

/// What one progress stream writes, event by event: ids from `firstID` up (so a client's
/// `Last-Event-ID` + 1 continues), `retry:` on the first event (an hour's on a terminal one),
/// nothing after a terminal event, and a progress event not when it is the one written last. (Which progress a stream that fell behind
/// gets, the newest or none before a waiting lifecycle event, the subscription decides.)
/// Pure but for the closure it is given.
struct EventStreamCursor {
    let firstID: UInt64
    private(set) var nextID: UInt64
    private(set) var ended = false
    /// The frame returned last is a lifecycle event's.
    private(set) var lastWasLifecycle = false
    /// The last progress written, by bytes and time (a newer snapshot differs in one of them).
    private var lastProgress: (bytes: Int64, updatedAt: Date)?

    init(firstID: UInt64) {
        self.firstID = firstID
        self.nextID = firstID
    }

    /// `frame(for:data:)` with the shared encodings.
    mutating func frame(for event: DownloadEvent, eventData: EventDataCache) -> [UInt8]? {
        frame(for: event, data: { eventData.data(for: $0, encode: DownloadAPI.eventData) })
    }

    /// The bytes to write for `event`, or nil to write nothing.
    mutating func frame(for event: DownloadEvent, data: (DownloadEvent) -> String) -> [UInt8]? {
        guard !ended else { return nil }
        lastWasLifecycle = false
        if case .progress(let snapshot) = event {
            if let last = lastProgress, last.bytes == snapshot.bytesWritten, last.updatedAt == snapshot.updatedAt {
                return nil
            }
            lastProgress = (snapshot.bytesWritten, snapshot.updatedAt)
        }
        // The stream ends after a terminal event; a browser's EventSource left open would come
        // back for it every 2 s: its `retry:` puts that off by an hour.
        let retry = event.isTerminal ? DownloadAPI.endedRetryMilliseconds : nextID == firstID ? DownloadAPI.retryMilliseconds : nil
        let bytes = Self.frame(id: nextID, event: DownloadAPI.eventName(event), data: data(event), retryMilliseconds: retry)
        nextID &+= 1
        if event.isTerminal { ended = true }
        if case .progress = event {} else { lastWasLifecycle = true }
        return bytes
    }

    /// Whether `text` holds CR or LF (memchr over contiguous UTF-8: the data is scanned for every
    /// stream that writes it).
    static func hasLineBreak(_ text: String) -> Bool {
        if let found = text.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(base, 0x0A, bytes.count) != nil || memchr(base, 0x0D, bytes.count) != nil
        }) {
            return found
        }
        return text.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D })
    }

    /// One event's bytes, identical to `ServerSentEvent.encoded`, built straight into one buffer
    /// for the usual single-line `data` (a multi-line one goes through `ServerSentEvent`).
    static func frame(id: UInt64, event: String, data: String, retryMilliseconds: Int?) -> [UInt8] {
        let plain = !Self.hasLineBreak(data) && !event.utf8.contains(0x0D)
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
