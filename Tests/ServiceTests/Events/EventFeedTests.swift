import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// The feed behind `GET /events`, on a manual clock: snapshot then live events, `Last-Event-ID`
/// replay from the bounded history, ids above the stored reservation, and progress paced by the
/// shared budget however many downloads there are.
@Suite struct EventFeedTests {
    static func snapshot(_ id: String, _ state: DownloadState = .downloading, bytes: Int64 = 0) -> DownloadSnapshot {
        var s = DownloadSnapshot(id: id, url: "http://origin/\(id)", state: state, storage: .cache,
                                 createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0))
        s.bytesWritten = bytes
        return s
    }

    static func feed(pacing: ProgressPacing = ProgressPacing(), scheduler: ManualScheduler = ManualScheduler(),
                     history: Int = EventFeed.historyCapacity, stored: UInt64? = nil,
                     reserve: EventFeed.Reserve? = nil, block: UInt64 = 1 << 20,
                     snapshotBudget: Int = EventFeed.snapshotBudget) -> EventFeed {
        EventFeed(pacer: ProgressPacer(pacing: pacing, tick: 0.05, scheduler: scheduler), stored: stored, reserve: reserve,
                  historyCapacity: history, snapshotBudget: snapshotBudget, idBlock: block,
                  background: DispatchQueue(label: "feed-test"))
    }

    /// Everything the watcher has now (until it would wait).
    static func drain(_ feed: EventFeed, _ watcher: UInt64) -> [FeedItem] {
        var items: [FeedItem] = []
        while case .item(let item) = feed.poll(watcher, waker: {}) { items.append(item) }
        return items
    }

    static func describe(_ item: FeedItem) -> String {
        switch item.kind {
        case .snapshot(let s): "snapshot \(s.id)"
        case .created(let s): "created \(s.id)"
        case .event(.progress(let s)): "progress \(s.id) \(s.bytesWritten)"
        case .event(let e): "\(e.isTerminal ? "end" : "life") \(e.snapshot.id) \(e.snapshot.state.rawValue)"
        }
    }

    @Test func freshWatcherGetsTheSnapshotThenLiveEventsWithIncreasingIDs() {
        let feed = Self.feed()
        feed.ingestCreated(Self.snapshot("a"))
        feed.ingest(.progress(Self.snapshot("a", bytes: 10)))
        let watcher = feed.makeWatcher(expecting: 0)!
        #expect(Self.drain(feed, watcher).isEmpty)  // waits for its snapshot
        feed.start(watcher, snapshots: [Self.snapshot("a", bytes: 10), Self.snapshot("b", .paused)])
        feed.ingest(.progress(Self.snapshot("a", bytes: 20)))
        feed.ingest(.completed(Self.snapshot("b", .completed)))
        let items = Self.drain(feed, watcher)
        // Progress older than the snapshot is not repeated; lifecycle first, then the newest progress.
        #expect(items.map(Self.describe) == ["snapshot a", "snapshot b", "end b completed", "progress a 20"])
        let ids = items.map(\.id)
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
    }

    /// A watcher that does not read keeps its whole snapshot: fresh watchers get in only while the
    /// snapshots not yet handed out leave room for theirs (the operator's always; and one when none
    /// is held, however large); what is handed out, or given up, makes room.
    @Test func snapshotsNotYetHandedOutBoundFreshWatchers() {
        let feed = Self.feed(snapshotBudget: 5)
        let three = ["a", "b", "c"].map { Self.snapshot($0) }
        let idle = feed.makeWatcher(expecting: 3)!
        #expect(feed.makeWatcher(expecting: 3) == nil)  // 3 reserved + 3 > 5
        feed.start(idle, snapshots: three)
        #expect(feed.heldSnapshots == 3)
        #expect(feed.makeWatcher(expecting: 3) == nil)
        let small = feed.makeWatcher(expecting: 2)!  // 3 + 2 fit
        feed.start(small, snapshots: Array(three.prefix(2)))
        let operatorWatcher = feed.makeWatcher(expecting: 3, exempt: true)!
        feed.start(operatorWatcher, snapshots: three)
        #expect(feed.heldSnapshots == 8)
        #expect(Self.drain(feed, operatorWatcher).count == 3)
        #expect(Self.drain(feed, small).count == 2)
        #expect(feed.heldSnapshots == 3)  // the idle one's
        #expect(feed.makeWatcher(expecting: 3) == nil)
        // The idle watcher reads one item; its snapshot shrinks: room for two more.
        guard case .item = feed.poll(idle, waker: {}) else { Issue.record("no snapshot item"); return }
        #expect(feed.heldSnapshots == 2)
        let next = feed.makeWatcher(expecting: 3)!
        feed.cancel(next)  // gone before its snapshot: its reservation goes with it
        feed.cancel(idle)
        #expect(feed.heldSnapshots == 0)
        // Nothing held: one watcher gets in whatever its snapshot's size.
        let large = feed.makeWatcher(expecting: 100)!
        #expect(feed.makeWatcher(expecting: 1) == nil)
        feed.start(large, snapshots: three)  // fewer than expected by the time it starts
        #expect(feed.heldSnapshots == 3)
        feed.finish()
        feed.cancel(large)
        #expect(feed.heldSnapshots == 0)
    }

    @Test func replayAfterLastEventIDGetsExactlyTheLaterEvents() {
        let feed = Self.feed()
        let watcher = feed.makeWatcher(expecting: 0)!
        feed.start(watcher, snapshots: [])
        feed.ingestCreated(Self.snapshot("a"))
        feed.ingestCreated(Self.snapshot("b"))
        feed.ingest(.progress(Self.snapshot("a", bytes: 5)))
        let first = Self.drain(feed, watcher)
        #expect(first.map(Self.describe) == ["created a", "created b", "progress a 5"])
        let last = first[1].id  // the client saw "created b" and went away
        feed.ingest(.progress(Self.snapshot("b", bytes: 7)))
        feed.ingest(.paused(Self.snapshot("a", .paused, bytes: 5)))
        feed.ingest(.progress(Self.snapshot("b", bytes: 9)))
        let replay = try! #require(feed.replaying(after: last))
        let replayed = Self.drain(feed, replay)
        // a's progress 5 was superseded by its paused event; b's newest progress only.
        #expect(replayed.map(Self.describe) == ["life a paused", "progress b 9"])
        #expect(replayed.allSatisfy { $0.id > last })
        // From the live watcher's own last id: the same, and nothing twice.
        let again = try! #require(feed.replaying(after: first[2].id))
        #expect(Self.drain(feed, again).map(Self.describe) == ["life a paused", "progress b 9"])
        // An id never issued (from the future) or from before this run is outside: no replay.
        #expect(feed.replaying(after: 1_000_000) == nil)
    }

    /// A client that left while catching up on lifecycle events, before the progress that came
    /// earlier was handed to it, gets that progress on its replay (its id says nothing about it).
    @Test func progressNotYetHandedOutIsOwedAfterAReplay() {
        let feed = Self.feed()
        let watcher = feed.makeWatcher(expecting: 0)!
        feed.start(watcher, snapshots: [])
        feed.ingest(.progress(Self.snapshot("c", bytes: 3)))
        feed.ingest(.paused(Self.snapshot("a", .paused)))
        guard case .item(let seen) = feed.poll(watcher, waker: {}) else { Issue.record("nothing"); return }
        #expect(Self.describe(seen) == "life a paused")  // and the client went away
        let replay = try! #require(feed.replaying(after: seen.id))
        #expect(Self.drain(feed, replay).map(Self.describe) == ["progress c 3"])
    }

    /// A client cut off inside its snapshot reconnects with the id of the last item it got: it gets
    /// a fresh snapshot (replaying after that id would never send the rest of the snapshot); after
    /// the snapshot's last item, a replay.
    @Test func anIDInsideAnUnfinishedSnapshotGetsAFreshSnapshot() {
        let feed = Self.feed()
        let watcher = feed.makeWatcher(expecting: 0)!
        feed.start(watcher, snapshots: [Self.snapshot("a", .completed), Self.snapshot("b", .paused), Self.snapshot("c", .completed)])
        let items = Self.drain(feed, watcher)
        #expect(items.map(Self.describe) == ["snapshot a", "snapshot b", "snapshot c"])
        #expect(feed.replaying(after: items[0].id) == nil, "cut off after a")
        #expect(feed.replaying(after: items[1].id) == nil, "cut off after b")
        feed.ingestCreated(Self.snapshot("d"))
        let replay = try! #require(feed.replaying(after: items[2].id), "the whole snapshot was seen")
        #expect(Self.drain(feed, replay).map(Self.describe) == ["created d"])
    }

    @Test func snapshotSpansAreBoundedAndNeverLetACutOffIDThrough() {
        var spans = SnapshotSpans(capacity: 2)
        spans.record(first: 10, count: 3)  // ids 10, 11, 12: 12 is its last item
        spans.record(first: 20, count: 1)  // one item: nothing after it to miss
        #expect(spans.cutsOff(10) && spans.cutsOff(11) && !spans.cutsOff(12) && !spans.cutsOff(20) && !spans.cutsOff(9))
        spans.record(first: 30, count: 2)
        spans.record(first: 40, count: 2)  // the first span goes: its ids count as cut off, earlier ones not
        #expect(!spans.cutsOff(5) && spans.cutsOff(10) && spans.cutsOff(11) && !spans.cutsOff(12) && spans.cutsOff(30) && !spans.cutsOff(31))
        #expect(spans.cutsOff(40) && !spans.cutsOff(41))
        spans.record(first: 50, count: 2)  // the next goes too: the forgotten stretch runs 10…30
        #expect(!spans.cutsOff(5) && spans.cutsOff(12) && spans.cutsOff(30) && !spans.cutsOff(31) && spans.cutsOff(40))
    }

    /// Spans the history no longer reaches go first, the forgotten stretch with them: ids the
    /// history holds are not taken for cut off because of them.
    @Test func snapshotSpansBeforeTheHistoryGoFirst() {
        var spans = SnapshotSpans(capacity: 2)
        spans.record(first: 10, count: 3)
        spans.record(first: 20, count: 3)
        spans.record(first: 30, count: 3)  // 10…11 forgotten
        #expect(spans.cutsOff(10) && spans.cutsOff(20) && spans.cutsOff(30))
        spans.record(first: 40, count: 3, outsideHistory: 25)  // the history starts after 25: 10…21 go, nothing is forgotten
        #expect(!spans.cutsOff(26) && spans.cutsOff(30) && spans.cutsOff(31) && !spans.cutsOff(32) && spans.cutsOff(40))
        spans.record(first: 50, count: 3, outsideHistory: 25)  // still full: 30…31 forgotten
        #expect(spans.cutsOff(31) && !spans.cutsOff(26) && !spans.cutsOff(35) && spans.cutsOff(50))
    }

    @Test func historyIsBoundedAndOlderIDsGetNoReplay() {
        let feed = Self.feed(history: 4, stored: 100)
        #expect(feed.replaying(after: 50) == nil)  // an id of an earlier run
        var ids: [UInt64] = []
        let watcher = try! #require(feed.replaying(after: 100))  // the id below this run's first
        for n in 0..<6 {
            feed.ingestCreated(Self.snapshot("d\(n)"))
            ids.append(contentsOf: Self.drain(feed, watcher).map(\.id))
        }
        #expect(ids.count == 6 && ids.first! > 100)
        #expect(feed.replaying(after: ids[0]) == nil)  // d1 is no longer held
        let inside = try! #require(feed.replaying(after: ids[1]))
        #expect(Self.drain(feed, inside).map(Self.describe) == ["created d2", "created d3", "created d4", "created d5"])
        // A watcher that falls further behind than the history holds is ended (it reconnects).
        let slow = try! #require(feed.replaying(after: ids[5]))
        for n in 6..<11 { feed.ingestCreated(Self.snapshot("d\(n)")) }
        #expect(feed.poll(slow, waker: {}) == .end)
    }

    @Test func idsStayBelowWhatWasStoredAndContinueAboveIt() {
        let stored = Mutex<[UInt64]>([])
        let reserve: EventFeed.Reserve = { limit in
            stored.withLock { $0.append(limit) }
            return true
        }
        let feed = Self.feed(stored: 7_000, reserve: reserve, block: 16)
        #expect(stored.withLock { $0 } == [7_017])  // reserved at start, before any id
        let watcher = feed.makeWatcher(expecting: 0)!
        feed.start(watcher, snapshots: [])
        var ids: [UInt64] = []
        for n in 0..<100 {
            feed.ingestCreated(Self.snapshot("d\(n)"))
            ids.append(contentsOf: Self.drain(feed, watcher).map(\.id))
            // Every id handed out is below a stored limit (the background store may lag: then the
            // feed stores in line).
            #expect(ids.last! < stored.withLock { $0.max()! })
        }
        #expect(ids.first! == 7_001 && ids == ids.sorted() && Set(ids).count == 100)
        // The next run starts above the last stored limit: above every id of this one.
        let next = Self.feed(stored: stored.withLock { $0.max()! }, reserve: reserve, block: 16)
        let nextWatcher = next.makeWatcher(expecting: 0)!
        next.start(nextWatcher, snapshots: [])
        next.ingestCreated(Self.snapshot("x"))
        #expect(Self.drain(next, nextWatcher).first!.id > ids.last!)
    }

    /// 1 000 downloads with progress, 100 watchers and a budget of 5 000 progress deliveries a
    /// second: the watchers together get about the budget (not 1 000 × 100 × 10 a second), each
    /// download's progress reaches every watcher in turn, and lifecycle events still pass at once.
    @Test func progressToManyWatchersStaysWithinTheSharedBudget() {
        let scheduler = ManualScheduler()
        let pacing = ProgressPacing(deliveriesPerSecond: 5_000, minimumSpacing: 0.1)
        let feed = Self.feed(pacing: pacing, scheduler: scheduler)
        let watchers = (0..<100).map { _ in feed.makeWatcher(expecting: 0)! }
        for w in watchers { feed.start(w, snapshots: []) }
        var progressItems = 0
        var seen = Array(repeating: Set<String>(), count: watchers.count)
        var bytes: Int64 = 0
        // 4 simulated seconds: every download reports progress 10 times a second.
        for _ in 0..<40 {
            bytes += 1
            for d in 0..<1_000 { feed.ingest(.progress(Self.snapshot("d\(d)", bytes: bytes))) }
            for (n, w) in watchers.enumerated() {
                for item in Self.drain(feed, w) {
                    progressItems += 1
                    seen[n].insert(item.kind.snapshot.id)
                }
            }
            scheduler.advance(0.1)
        }
        // Budget: 5 000 a second for 4 s, plus each watcher's small burst allowance.
        #expect(progressItems <= 5_000 * 4 + 100 * 100)
        #expect(progressItems >= 5_000 * 3)  // and the budget is used
        // Round robin: every watcher got a share of distinct downloads, none stuck on a few.
        #expect(seen.allSatisfy { $0.count >= 150 })
        // A lifecycle event is never held back, budget spent or not.
        feed.ingest(.paused(Self.snapshot("d7", .paused)))
        for w in watchers {
            let items = Self.drain(feed, w)
            #expect(items.first.map(Self.describe) == "life d7 paused")
        }
    }
}
