import Foundation

// The feed of every download's events (`EventFeed`): what it is fed, and its watchers' snapshots.
extension EngineCore {
    /// The feed, its ids continuing above what the state store reserved in an earlier run.
    static func makeFeed(pacer: ProgressPacer, stateWriter: StateWriter, snapshotBudget: Int, background: DispatchQueue) -> EventFeed {
        let found: Int64? = try? stateWriter.perform { store throws(StateStoreError) -> Int64? in
            try (store as? CounterStore)?.counter(EventFeed.idCounter)
        }
        let reserve: EventFeed.Reserve = { limit in
            (try? stateWriter.perform { store throws(StateStoreError) -> Bool in
                guard let counters = store as? CounterStore else { return false }
                try counters.setCounter(EventFeed.idCounter, to: Int64(clamping: limit))
                return true
            }) ?? false
        }
        return EventFeed(pacer: pacer, stored: found.map { UInt64(max(0, $0)) }, reserve: reserve, snapshotBudget: snapshotBudget,
                         background: background)
    }

    func watchAll(after lastEventID: UInt64?, exempt: Bool) -> FeedSubscription? {
        if let lastEventID, let id = feed.replaying(after: lastEventID) {
            return FeedSubscription(feed: feed, id: id)
        }
        let feed = self.feed
        // Never under the engine's lock: the feed's lock is held while it stores an id reservation
        // (`StateWriter.perform`), which may wait for the writer, which may wait for the engine's lock.
        guard let id = feed.makeWatcher(expecting: locked { byID.count }, exempt: exempt) else { return nil }
        decide {
            // Handed over as an effect, so after every event these snapshots reflect and before every
            // event decided later. Made under the engine's lock (they must be of this moment), put
            // in order (oldest first) outside it: by their keys, then each snapshot moved once
            // (large values: sorting them whole cost as much as making them).
            var keys: [(createdAt: Date, id: String)] = []
            var made: [DownloadSnapshot] = []
            keys.reserveCapacity(byID.count)
            made.reserveCapacity(byID.count)
            for record in byID.values {
                keys.append((record.createdAt, record.id))
                made.append(freshSnapshot(record))
            }
            effects.append { [keys, made] in
                let order = keys.indices.sorted { a, b in
                    keys[a].createdAt != keys[b].createdAt ? keys[a].createdAt < keys[b].createdAt : keys[a].id < keys[b].id
                }
                feed.start(id, snapshots: order.map { made[$0] })
            }
        }
        return FeedSubscription(feed: feed, id: id)
    }

    /// Under `lock`: a new download, told to the feed in decision order.
    func publishCreated(_ record: DownloadRecord) {
        let snapshot = record.snapshot()
        let feed = self.feed
        effects.append { feed.ingestCreated(snapshot) }
    }
}

extension EventFeed {
    /// The state store's counter holding the reservation of event ids.
    static let idCounter = "event_id"
}
