import DownloaderEngine
import Foundation
import MiniHTTPServer

/// One `GET /events` stream's body: the feed's items as Server-Sent Events, fed by the connection's
/// event loop (`PushSource`), like `EventStreamSource`: no task per stream. While the connection's
/// output is above its high watermark the stream takes nothing (the feed keeps its place meanwhile:
/// lifecycle events wait in its history, progress is the newest when the stream takes it).
/// Events are written in batches of up to `batchBytes` (one chunk, one send), not one by one: a
/// fresh watcher's snapshot of 1 000 downloads is then ~40 sends instead of 1 000.
final class FeedStreamSource: PushSource, @unchecked Sendable {
    private let subscription: FeedSubscription
    private let eventData: EventDataCache
    /// The stream's place under `--max-event-subscribers`, held until the stream ends.
    private var lease: SubscriberQuota.Lease?
    private let keepAlive: (comment: [UInt8], seconds: Double)?
    /// Whether private (credentialed) downloads are shown: to the operator only.
    private let showsPrivate: Bool
    // Loop thread only.
    private var started = false
    private var first = true
    static let batchBytes = 16 << 10

    init(subscription: FeedSubscription, eventData: EventDataCache, lease: SubscriberQuota.Lease?,
         keepAlive: (comment: [UInt8], seconds: Double)?, showsPrivate: Bool) {
        self.subscription = subscription
        self.showsPrivate = showsPrivate
        self.eventData = eventData
        self.lease = lease
        self.keepAlive = keepAlive
    }

    func produce(_ stream: PushStream) {
        if !started {
            started = true
            if let keepAlive { stream.setIdleHeartbeat(keepAlive.comment, after: keepAlive.seconds) }
        }
        var batch: [UInt8] = []
        defer { stream.write(batch) }  // Writing nothing is a no-op.
        while stream.hasRoom {
            switch subscription.poll(waker: { [weak stream] in stream?.wake() }) {
            case .wait:
                return
            case .end:
                stream.write(batch)
                batch = []
                stream.finish()
                return
            case .item(let item) where item.kind.snapshot.isPrivate && !showsPrivate:
                continue
            case .item(let item):
                let (name, data) = DownloadAPI.feedEvent(item.kind, eventData: eventData)
                batch.append(contentsOf: EventStreamCursor.frame(id: item.id, event: name, data: data,
                                                                 retryMilliseconds: first ? DownloadAPI.retryMilliseconds : nil))
                first = false
                if batch.count >= Self.batchBytes {
                    stream.write(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
    }

    func ended(_ stream: PushStream, completed: Bool) {
        subscription.cancel()
        lease = nil
    }
}
