import Foundation
import Testing
@testable import DownloaderEngine

/// The cluster feed's pure parts: what each change tells (`ClusterFeedState`), and the ids derived
/// from the change versions (`ClusterEventIDs`) as the `EventFeed` hands them to watchers, the
/// same on every replica.
@Suite struct ClusterFeedStateTests {
    static func row(_ id: String, _ state: DownloadState, offset: Int64 = 0, generation: UInt64 = 0) -> ClusterRow {
        var stored = ClusterReadsTests.row(id, state, created: 1, offset: offset)
        stored.generation = generation
        return ClusterRow(stored: stored)
    }

    static func change(_ version: UInt64, _ id: String, _ kind: ClusterFeedStore.Change.Kind, _ row: ClusterRow?) -> ClusterFeedStore.Change {
        ClusterFeedStore.Change(version: version, id: id, kind: kind, row: row)
    }

    static func told(_ kind: FeedItem.Kind?) -> String {
        switch kind {
        case nil: "-"
        case .snapshot(let s)?: "snapshot \(s.id)"
        case .created(let s)?: "created \(s.id)"
        case .event(.progress(let s))?: "progress \(s.id) \(s.state.rawValue) \(s.bytesWritten)"
        case .event(.removed(let by, let s))?: "removed \(s.id) \(by.rawValue)"
        case .event(.resumed(let offset, let restarted, let s))?: "resumed \(s.id) \(offset) \(restarted)"
        case .event(let e)?: "\(e.snapshot.state.rawValue) \(e.snapshot.id)"
        }
    }

    @Test func eachChangeTellsWhatChangedSinceTheRowWasLastRead() {
        var state = ClusterFeedState(version: 10, rows: [Self.row("old", .paused, offset: 7)], ignoring: [])
        let table: [(ClusterFeedStore.Change, String)] = [
            (Self.change(9, "old", .changed(from: .paused, fromGeneration: 0, to: .downloading, toGeneration: 0), Self.row("old", .downloading)),
             "-"),  // not above the cursor: ignored
            (Self.change(11, "new", .created(.downloading), Self.row("new", .downloading)), "created new"),
            (Self.change(12, "new", .row, Self.row("new", .downloading, offset: 100)), "progress new downloading 100"),
            (Self.change(13, "new", .row, Self.row("new", .downloading, offset: 100)), "-"),  // nothing a snapshot shows changed
            // The entry's states count, the row is as it is now (paused again, told by its own entry).
            (Self.change(14, "old", .changed(from: .paused, fromGeneration: 0, to: .downloading, toGeneration: 0), Self.row("old", .paused, offset: 7)),
             "resumed old 7 false"),
            (Self.change(15, "old", .changed(from: .downloading, fromGeneration: 0, to: .paused, toGeneration: 0), Self.row("old", .paused, offset: 7)),
             "paused old"),
            (Self.change(16, "new", .changed(from: .downloading, fromGeneration: 0, to: .downloading, toGeneration: 1),
                         Self.row("new", .downloading, generation: 1)), "resumed new 0 true"),
            (Self.change(17, "new", .changed(from: .downloading, fromGeneration: 1, to: .completed, toGeneration: 1),
                         Self.row("new", .completed, generation: 1)), "completed new"),
            (Self.change(18, "old", .removed(by: .operator), nil), "removed old operator"),
            (Self.change(19, "ghost", .created(.queued), nil), "-"),  // created and gone before it was read
            (Self.change(20, "ghost", .removed(by: nil), nil), "-"),  // never seen: nothing to tell
            (Self.change(21, "new", .removed(by: nil), nil), "removed new retention"),  // no tombstone: the service's own bounds
        ]
        for (change, expected) in table {
            #expect(Self.told(state.apply(change)) == expected, "version \(change.version)")
        }
        #expect(state.version == 21 && state.views.isEmpty)
    }

    @Test func idsFromVersionsIncreaseForAWatcherAndReplayOnAnyReplica() {
        let scheduler = ManualScheduler()
        func feed() -> EventFeed {
            let f = EventFeed(pacer: ProgressPacer(pacing: ProgressPacing(), tick: 0.05, scheduler: scheduler), stored: nil, reserve: nil,
                              background: DispatchQueue(label: "cluster-feed-test"))
            f.becomeCluster(at: 10)
            return f
        }
        let (b, c) = (feed(), feed())
        let snapshot = EventFeedTests.snapshot("a")
        // The engine's own events are not the cluster feed's.
        b.ingestCreated(EventFeedTests.snapshot("local"))
        let watcher = b.makeWatcher(expecting: 0)!
        b.start(watcher, snapshots: [snapshot])
        for f in [b, c] {
            f.ingest(.created(snapshot), version: 12)
            f.ingest(.event(.progress(EventFeedTests.snapshot("a", bytes: 5))), version: 13)
            f.ingest(nil, version: 14)
        }
        let seen = EventFeedTests.drain(b, watcher)
        #expect(seen.map(EventFeedTests.describe) == ["snapshot a", "created a", "progress a 5"])
        let ids = seen.map(\.id)
        #expect(ids == [(10 << 20) | ClusterEventIDs.top, 12 << 20, (14 << 20) | 1], "\(ids)")
        // c never had this watcher: its id means the same there.
        for f in [b, c] { f.ingest(.event(.paused(EventFeedTests.snapshot("a", .paused))), version: 15) }
        let replay = try! #require(c.replaying(after: ids[2]))
        #expect(EventFeedTests.drain(c, replay).map { "\($0.id) \(EventFeedTests.describe($0))" } == ["\(15 << 20) life a paused"])
        // Inside an unfinished snapshot, or before c's start: a fresh snapshot instead.
        #expect(c.replaying(after: (10 << 20) | ClusterEventIDs.snapshotBase) == nil)
        #expect(c.replaying(after: 9 << 20) == nil)
    }
}

/// A reconnecting watcher's `Last-Event-ID` makes its request read the cluster database only when
/// it is just ahead of this replica: an id no replica gave out never costs a read in the request.
@Suite struct ClusterFeedEarlyReadTests {
    final class CountingSource: ClusterFeedSource, @unchecked Sendable {
        let reads = OriginLock<Int>(0)
        func stamp() throws(StateStoreError) -> Int { 0 }
        func start() throws(StateStoreError) -> (version: UInt64, rows: [ClusterRow]) { (10, []) }
        func changes(after version: UInt64) throws(StateStoreError) -> (changes: [ClusterFeedStore.Change], more: Bool) {
            reads.withLock { $0 += 1 }
            return ([], false)
        }
    }

    @Test func onlyAnIDJustAheadReadsInTheRequest() {
        let scheduler = ManualScheduler()
        let feed = EventFeed(pacer: ProgressPacer(pacing: ProgressPacing(), tick: 0.05, scheduler: scheduler), stored: nil, reserve: nil,
                             background: DispatchQueue(label: "cluster-feed-early-read"))
        let source = CountingSource()
        let cluster = ClusterFeed(source: source, feed: feed, scheduler: scheduler, ignoring: [])
        cluster.start()
        defer { cluster.stop() }
        let before = source.reads.withLock { $0 }
        _ = cluster.watch(after: ClusterEventIDs.id(version: 12), exempt: false)
        #expect(source.reads.withLock { $0 } == before + 1)
        for far in [ClusterEventIDs.id(version: 10 + ClusterFeed.earlyReadWindow + 1), UInt64.max] {
            _ = cluster.watch(after: far, exempt: false)
        }
        #expect(source.reads.withLock { $0 } == before + 1)
    }
}
