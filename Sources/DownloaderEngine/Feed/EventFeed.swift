import Foundation

/// Every download's events in one stream (`DownloadEngine.watchAll`): `created` and lifecycle events
/// kept in a bounded history for `Last-Event-ID` replay, each download's newest progress, and the
/// watchers. Progress to watchers shares the engine's progress budget (`ProgressPacer`): a watcher
/// counts as one subscriber per download with live progress, and gets at most its share of
/// progress items a second (lifecycle events are never paced). Fed by the engine's effects, in the
/// order the events were decided. One lock, never held while calling out (wakers run after it).
///
/// Cluster mode (`becomeCluster`): fed by `ClusterFeed` from the cluster database's changes, in their
/// version order, with ids derived from the versions (`ClusterEventIDs`); the engine's own events
/// are ignored (the database shows them too, and the ids must be the same on every replica).
final class EventFeed: @unchecked Sendable {
    static let historyCapacity = 10_000
    /// Snapshot items fresh watchers may hold, not yet handed out, all together (~1 KiB each).
    static let snapshotBudget = 131_072

    /// Stores a reservation of event ids (true when it is durable).
    typealias Reserve = @Sendable (UInt64) -> Bool

    private let pacer: ProgressPacer
    private let reserve: Reserve?
    private let background: DispatchQueue
    private let lock = NSLock()
    // Guarded by `lock`.
    private var ids: EventIDSequence
    /// Cluster mode's ids (nil in a single process).
    private var cluster: ClusterEventIDs?
    private var history: FeedHistory
    /// A single process's snapshot ids (a `Last-Event-ID` among them gets a fresh snapshot).
    private var snapshotSpans = SnapshotSpans()
    private var slots = ProgressSlots()
    private var watchers: [UInt64: FeedWatcherState] = [:]
    private var nextWatcher: UInt64 = 0
    /// Every watcher's `heldItems`, summed: at most `snapshotBudget` but for exempt watchers and the
    /// first one (so a watcher always gets in when no other holds a snapshot).
    private var heldSnapshotItems = 0
    private let snapshotBudget: Int
    private var wakeOnEvent: [UInt64: @Sendable () -> Void] = [:]
    private var wakeOnTick: [UInt64: @Sendable () -> Void] = [:]
    private var ticking = false
    private var finished = false

    /// `stored`: the id reservation a previous run stored (nil: none); `reserve` stores the next
    /// (nil: ids are not kept across restarts — tests).
    init(pacer: ProgressPacer, stored: UInt64?, reserve: Reserve?, historyCapacity: Int = historyCapacity,
         snapshotBudget: Int = snapshotBudget, idBlock: UInt64 = 1 << 20, background: DispatchQueue = .global()) {
        self.pacer = pacer
        self.snapshotBudget = snapshotBudget
        self.reserve = reserve
        self.background = background
        ids = EventIDSequence(stored: stored, block: idBlock)
        history = FeedHistory(capacity: historyCapacity, droppedUpTo: ids.floor)
        if let reserve {
            let limit = ids.nextLimit
            if reserve(limit) { ids.reserved(upTo: limit) }
        }
    }

    // MARK: Fed by the engine (its effects, in decision order)

    func ingest(_ event: DownloadEvent) {
        ingest(.event(event), version: nil)
    }

    func ingestCreated(_ snapshot: DownloadSnapshot) {
        ingest(.created(snapshot), version: nil)
    }

    /// Cluster mode: the change stamped `version` (above every one before), and what it shows
    /// (nil: nothing to tell; the ids still move on).
    func ingest(_ kind: FeedItem.Kind?, version: UInt64) {
        ingest(kind, version: Optional(version))
    }

    /// `version` nil: the engine's own event (ignored in cluster mode).
    private func ingest(_ kind: FeedItem.Kind?, version: UInt64?) {
        let wake = locked { () -> [@Sendable () -> Void] in
            guard (version != nil) == (cluster != nil) else { return [] }
            if let version { cluster?.advance(to: version) }
            guard let kind else { return [] }
            let download = kind.snapshot.id
            let id = version.map(ClusterEventIDs.id(version:)) ?? takeID()!
            if case .event(let event) = kind, case .progress = event {
                if slots.set(event, of: download, id: id) { updateUnits() }
                return takeWakers(tick: false)
            }
            if slots.remove(download) { updateUnits() }
            history.append(.init(id: id, download: download, kind: kind))
            return takeWakers(tick: true)
        }
        for waker in wake { waker() }
    }

    /// Switches to cluster mode, its changes applied up to `version` (before any watcher).
    func becomeCluster(at version: UInt64) {
        locked {
            cluster = ClusterEventIDs(version: version)
            history = FeedHistory(capacity: history.capacity, droppedUpTo: ClusterEventIDs.id(version: version))
            slots = ProgressSlots()
            updateUnits()
        }
    }

    /// Cluster mode: the newest change version applied (nil in a single process).
    var clusterVersion: UInt64? { locked { cluster?.version } }

    // MARK: Watchers

    /// A watcher that gets its snapshot of about `expecting` downloads from `start` (to be called in
    /// the engine's effect order, right after the events the snapshot reflects). Nil when the
    /// snapshots other watchers hold, not yet handed out, leave no room for it under the budget
    /// (a client that does not read keeps its whole snapshot): unless `exempt` (the operator's).
    func makeWatcher(expecting: Int, exempt: Bool = false) -> UInt64? {
        locked {
            guard exempt || heldSnapshotItems == 0 || heldSnapshotItems + expecting <= snapshotBudget else { return nil }
            nextWatcher += 1
            var state = FeedWatcherState()
            state.reserved = expecting
            if finished { state.phase = .ended }
            watchers[nextWatcher] = state
            heldSnapshotItems += state.heldItems
            updateUnits()
            return nextWatcher
        }
    }

    /// Snapshot items watchers hold, not yet handed out (tests).
    var heldSnapshots: Int { locked { heldSnapshotItems } }

    /// Hands watcher `id` its snapshot: what follows is every event ingested from now on.
    func start(_ id: UInt64, snapshots: [DownloadSnapshot]) {
        let waker = locked { () -> (@Sendable () -> Void)? in
            guard let reserved = watchers[id]?.reserved, watchers[id]?.phase == .pending else { return nil }
            let firstID: UInt64  // the snapshot's ids are consecutive
            if let cluster {
                firstID = cluster.snapshotFirst(count: snapshots.count)
            } else {
                firstID = ids.next
                for _ in snapshots { _ = takeID() }
                snapshotSpans.record(first: firstID, count: snapshots.count, outsideHistory: history.droppedUpTo)
            }
            watchers[id]?.start(snapshots: snapshots, firstID: firstID, nextIndex: history.appended, now: pacer.now())
            heldSnapshotItems += snapshots.count - reserved
            return wakeOnEvent.removeValue(forKey: id)
        }
        waker?()
    }

    /// A watcher that continues after `lastID`; nil when the history no longer holds what followed it.
    func replaying(after lastID: UInt64) -> UInt64? {
        locked {
            let cutOff = cluster != nil ? ClusterEventIDs.isInsideSnapshot(lastID) : snapshotSpans.cutsOff(lastID)
            guard !finished, !cutOff,
                  let index = history.index(after: lastID, newestIssued: cluster?.newest ?? ids.newestIssued) else { return nil }
            nextWatcher += 1
            var state = FeedWatcherState()
            state.replay(after: lastID, nextIndex: index, now: pacer.now())
            watchers[nextWatcher] = state
            updateUnits()
            return nextWatcher
        }
    }

    enum Polled: Equatable {
        case item(FeedItem)
        case wait
        case end
    }

    /// The watcher's next item, or `.wait` (then `waker` is called once there may be one).
    func poll(_ id: UInt64, waker: @escaping @Sendable () -> Void) -> Polled {
        let pace = pacer.pace()
        let (polled, startTicking) = locked { () -> (Polled, Bool) in
            let spacing = pace.pacing.meanSpacing(subscribers: pace.subscribers)
            let rate: Double? = spacing == 0 ? nil : Double(slots.count) * 1e9 / Double(spacing)
            // In place: the watcher's state is not copied (its `sent` map is as large as the downloads).
            let held = watchers[id]?.heldItems ?? 0
            guard let step = watchers[id]?.step(history: history, slots: slots, rate: rate, now: pace.now, newID: { takeID() }) else {
                return (.end, false)
            }
            heldSnapshotItems += (watchers[id]?.heldItems ?? 0) - held
            switch step {
            case .item(let item): return (.item(item), false)
            case .end: return (.end, false)
            case .waitForEvents:
                wakeOnEvent[id] = waker
                return (.wait, false)
            case .waitForCredit:
                wakeOnTick[id] = waker
                defer { ticking = true }
                return (.wait, !ticking)
            }
        }
        if startTicking { scheduleTick() }
        return polled
    }

    func cancel(_ id: UInt64) {
        locked {
            heldSnapshotItems -= watchers.removeValue(forKey: id)?.heldItems ?? 0
            wakeOnEvent[id] = nil
            wakeOnTick[id] = nil
            updateUnits()
        }
    }

    /// Ends every watcher (engine shutdown); later ones end at once.
    func finish() {
        let wake = locked { () -> [@Sendable () -> Void] in
            finished = true
            for id in watchers.keys { watchers[id]?.phase = .ended }
            return takeWakers(tick: true)
        }
        for waker in wake { waker() }
    }

    var watcherCount: Int { locked { watchers.count } }

    // MARK: Under the lock

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// A watcher counts as one subscriber per download with live progress.
    private func updateUnits() {
        pacer.setFeedUnits(watchers.count * max(1, slots.count))
    }

    private func takeWakers(tick: Bool) -> [@Sendable () -> Void] {
        var wake = Array(wakeOnEvent.values)
        wakeOnEvent.removeAll(keepingCapacity: true)
        if tick {
            wake.append(contentsOf: wakeOnTick.values)
            wakeOnTick.removeAll(keepingCapacity: true)
        }
        return wake
    }

    /// A fresh id; nil in cluster mode when the current version has none left (`ClusterEventIDs.take`).
    private func takeID() -> UInt64? {
        if cluster != nil { return cluster?.take() }
        if let reserve {
            if ids.exhausted {
                // Rare (the background reservation is half a block ahead): stored here and now.
                let limit = ids.nextLimit
                _ = reserve(limit)
                ids.reserved(upTo: limit)  // Also when it failed: ids must keep coming.
            } else if ids.wantsReservation {
                ids.reserving = true
                let limit = ids.nextLimit
                background.async { [self] in
                    let stored = reserve(limit)
                    locked { if stored { ids.reserved(upTo: limit) } else { ids.reserving = false } }
                }
            }
        }
        return ids.take()
    }

    private func scheduleTick() {
        _ = pacer.scheduler.schedule(after: pacer.tickSeconds) { [weak self] in self?.tick() }
    }

    private func tick() {
        let wake = locked { () -> [@Sendable () -> Void] in
            ticking = false
            let wake = Array(wakeOnTick.values)
            wakeOnTick.removeAll(keepingCapacity: true)
            return wake
        }
        for waker in wake { waker() }
    }
}
