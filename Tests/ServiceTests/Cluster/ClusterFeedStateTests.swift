import Foundation
import Testing
@testable import DownloaderEngine

/// The cluster feed's pure parts: what each change tells (`ClusterFeedState`), and the ids derived
/// from the change versions (`ClusterEventIDs`) as the `EventFeed` hands them to watchers, the
/// same on every replica.
@Suite struct ClusterFeedStateTests {
    static func change(_ version: UInt64, _ id: String, _ state: DownloadState? , offset: Int64 = 0,
                       by: RemovalCause? = nil) -> ClusterFeedStore.Change {
        ClusterFeedStore.Change(version: version, id: id,
                                row: state.map { ClusterRow(stored: ClusterReadsTests.row(id, $0, created: 1, offset: offset)) },
                                removedBy: by)
    }

    static func told(_ kind: FeedItem.Kind?) -> String {
        switch kind {
        case nil: "-"
        case .snapshot(let s)?: "snapshot \(s.id)"
        case .created(let s)?: "created \(s.id)"
        case .event(.progress(let s))?: "progress \(s.id) \(s.bytesWritten)"
        case .event(.removed(let by, let s))?: "removed \(s.id) \(by.rawValue)"
        case .event(let e)?: "\(e.snapshot.state.rawValue) \(e.snapshot.id)"
        }
    }

    @Test func eachChangeTellsWhatChangedSinceTheRowWasLastRead() {
        var state = ClusterFeedState(version: 10, rows: [ClusterRow(stored: ClusterReadsTests.row("old", .paused, created: 0))],
                                     ignoring: [])
        let table: [(ClusterFeedStore.Change, String)] = [
            (Self.change(9, "old", .downloading), "-"),                  // not above the cursor: ignored
            (Self.change(11, "new", .downloading), "created new"),
            (Self.change(12, "new", .downloading, offset: 100), "progress new 100"),
            (Self.change(13, "new", .downloading, offset: 100), "-"),   // nothing a snapshot shows changed
            (Self.change(14, "old", .downloading), "downloading old"),  // resumed
            (Self.change(15, "new", .completed, offset: 0), "completed new"),
            (Self.change(16, "old", nil, by: .operator), "removed old operator"),
            (Self.change(17, "ghost", nil), "-"),                        // never seen: nothing to tell
            (Self.change(18, "new", nil), "removed new retention"),      // no tombstone: the service's own bounds
        ]
        for (change, expected) in table {
            #expect(Self.told(state.apply(change)) == expected, "version \(change.version)")
        }
        #expect(state.version == 18 && state.views.isEmpty)
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
        let watcher = b.makeWatcher()
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
