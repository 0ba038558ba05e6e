/// One watcher of the feed: where it is in the history, which progress it was handed, and its share
/// of the progress budget. Pure: `EventFeed` calls it under its lock with the history, the progress
/// slots and the pace.
///
/// What a watcher gets, in order: its snapshot (a fresh watcher), then every history entry after its
/// place (lifecycle events are never held back), then, once it has caught up, the newest progress
/// of each download whose progress is newer than what it was handed (round robin over the
/// downloads), at most `rate` a second when the budget is shared by many.
struct FeedWatcherState {
    enum Phase: Equatable {
        /// Made, waiting for its snapshot (taken under the engine's lock, handed over in order).
        case pending
        case active
        case ended
    }

    enum Step: Equatable {
        case item(FeedItem)
        /// Nothing new: wake it on the next event.
        case waitForEvents
        /// Progress is owed but its budget is spent: wake it on the next pacing tick (or event).
        case waitForCredit
        case end
    }

    var phase = Phase.pending
    /// Snapshot items set aside for it while pending (what `EventFeed` counted it for).
    var reserved = 0
    private var snapshot: [DownloadSnapshot] = []
    private var snapshotAt = 0
    private var snapshotFirstID: UInt64 = 0
    /// The absolute history index of the next entry to hand out.
    private(set) var nextIndex = 0
    /// Progress with an id above this is owed (for downloads not in `sent`).
    private var baseline: UInt64 = 0
    /// The progress id last handed out per download (cleared by the download's lifecycle event).
    private var sent: [String: UInt64] = [:]
    private var rotation = 0
    private var credit: Double = 1
    private var creditAt: UInt64 = 0

    /// Snapshot items it holds and has not handed out yet (set aside for it while pending).
    var heldItems: Int { reserved + snapshot.count - snapshotAt }

    /// A fresh watcher: `snapshots` get ids `firstID...`; the history continues at `nextIndex`.
    mutating func start(snapshots: [DownloadSnapshot], firstID: UInt64, nextIndex: Int, now: UInt64) {
        phase = .active
        reserved = 0
        snapshot = snapshots
        snapshotFirstID = firstID
        self.nextIndex = nextIndex
        baseline = firstID &+ UInt64(snapshots.count) &- 1
        creditAt = now
    }

    /// A watcher replaying after `lastID` (its history entries start at `nextIndex`). Every
    /// download's newest progress is owed again: an id says which lifecycle events the client saw,
    /// not which progress (handed out after the history it caught up on, or not yet when it left).
    /// A slot holds only progress newer than its download's last lifecycle event, so none is stale.
    mutating func replay(after lastID: UInt64, nextIndex: Int, now: UInt64) {
        phase = .active
        self.nextIndex = nextIndex
        baseline = 0
        creditAt = now
    }

    /// The next thing to hand out. `rate`: progress items a second allowed (nil: no limit);
    /// `newID` takes a fresh id (for a progress item; nil: none now, try again on the next tick).
    mutating func step(history: FeedHistory, slots: ProgressSlots, rate: Double?, now: UInt64,
                       newID: () -> UInt64?) -> Step {
        switch phase {
        case .pending: return .waitForEvents
        case .ended: return .end
        case .active: break
        }
        if snapshotAt < snapshot.count {
            let item = FeedItem(id: snapshotFirstID &+ UInt64(snapshotAt), kind: .snapshot(snapshot[snapshotAt]))
            snapshotAt += 1
            if snapshotAt == snapshot.count {
                snapshot = []
                snapshotAt = 0
            }
            return .item(item)
        }
        if nextIndex < history.appended {
            guard let entry = history.entry(at: nextIndex) else {
                // Fell behind by more than the history holds: lifecycle events were lost. Ending
                // makes the client reconnect, and its Last-Event-ID is outside: a fresh snapshot.
                phase = .ended
                return .end
            }
            nextIndex += 1
            sent[entry.download] = nil
            return .item(FeedItem(id: entry.id, kind: entry.kind))
        }
        guard let owed = nextOwed(slots) else { return .waitForEvents }
        if let rate {
            credit = min(max(1, rate * 0.1), credit + Double(now &- min(now, creditAt)) / 1e9 * rate)
            creditAt = now
            guard credit >= 1 else { return .waitForCredit }
        }
        guard let id = newID() else { return .waitForCredit }
        if rate != nil { credit -= 1 }
        let slot = slots[owed]
        rotation = owed + 1
        sent[slot.download] = slot.id
        return .item(FeedItem(id: id, kind: .event(slot.event)))
    }

    /// The position of the next slot (round robin) whose progress is newer than what was handed out.
    private func nextOwed(_ slots: ProgressSlots) -> Int? {
        let count = slots.count
        guard count > 0 else { return nil }
        var at = rotation < count ? rotation : 0
        for _ in 0..<count {
            let slot = slots[at]
            if slot.id > (sent[slot.download] ?? baseline) { return at }
            at += 1
            if at == count { at = 0 }
        }
        return nil
    }
}
