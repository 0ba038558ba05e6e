/// One watcher of every download's events (`DownloadEngine.watchAll`). Driven by polling, like
/// `DownloadSubscription.poll`: an event loop asks for the next item and is woken when there may
/// be one. Dropping the subscription (or `cancel`) stops it.
public final class FeedSubscription: Sendable {
    let feed: EventFeed
    let id: UInt64

    init(feed: EventFeed, id: UInt64) {
        self.feed = feed
        self.id = id
    }

    deinit { feed.cancel(id) }

    public enum Polled: Sendable, Equatable {
        case item(FeedItem)
        /// Nothing yet: the waker given to `poll` is called (once, on an engine thread: do little)
        /// when there may be something.
        case wait
        /// The feed ended (engine shutdown), or this watcher fell further behind than the history
        /// holds (reconnecting with its last id then gets a fresh snapshot).
        case end
    }

    public func poll(waker: @escaping @Sendable () -> Void) -> Polled {
        switch feed.poll(id, waker: waker) {
        case .item(let item): .item(item)
        case .wait: .wait
        case .end: .end
        }
    }

    public func cancel() { feed.cancel(id) }
}
