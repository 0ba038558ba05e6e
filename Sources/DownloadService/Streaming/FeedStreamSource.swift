import DownloaderEngine
import Foundation
import MiniHTTPServer

/// One `GET /events` stream's body: the feed's items as Server-Sent Events, fed by the connection's
/// event loop (`PushSource`), like `EventStreamSource`: no task per stream. While the connection's
/// output is above its high watermark the stream takes nothing (the feed keeps its place meanwhile:
/// lifecycle events wait in its history, progress is the newest when the stream takes it).
final class FeedStreamSource: PushSource, @unchecked Sendable {
    private let subscription: FeedSubscription
    private let eventData: EventDataCache
    /// The stream's place under `--max-event-subscribers`, held until the stream ends.
    private var lease: SubscriberQuota.Lease?
    private let keepAlive: (comment: [UInt8], seconds: Double)?
    // Loop thread only.
    private var started = false
    private var first = true

    init(subscription: FeedSubscription, eventData: EventDataCache, lease: SubscriberQuota.Lease?,
         keepAlive: (comment: [UInt8], seconds: Double)?) {
        self.subscription = subscription
        self.eventData = eventData
        self.lease = lease
        self.keepAlive = keepAlive
    }

    func produce(_ stream: PushStream) {
        if !started {
            started = true
            if let keepAlive { stream.setIdleHeartbeat(keepAlive.comment, after: keepAlive.seconds) }
        }
        while stream.hasRoom {
            switch subscription.poll(waker: { [weak stream] in stream?.wake() }) {
            case .wait:
                return
            case .end:
                stream.finish()
                return
            case .item(let item):
                let (name, data) = DownloadAPI.feedEvent(item.kind, eventData: eventData)
                stream.write(EventStreamCursor.frame(id: item.id, event: name, data: data,
                                                     retryMilliseconds: first ? DownloadAPI.retryMilliseconds : nil))
                first = false
            }
        }
    }

    func ended(_ stream: PushStream, completed: Bool) {
        subscription.cancel()
        lease = nil
    }
}
