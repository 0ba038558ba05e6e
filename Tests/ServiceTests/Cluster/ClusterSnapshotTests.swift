import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A snapshot another replica builds from a download's row (and its holder's heartbeat) is the one
/// the holder's engine shows, in every state; and what a relay publishes when a row changes.
@Suite struct ClusterSnapshotTests {
    enum Stage: String, CaseIterable { case queued, downloading, paused, completed, failed, segmented, waitingForSpace }

    /// The engine's snapshot of a download in `stage`, its record's stored row and token count.
    static func download(in stage: Stage) async throws -> (local: DownloadSnapshot, stored: StoredDownload) {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) {
            $0.maxConcurrentTransfers = 1
            $0.coalesceIgnoreQuery = ["sig"]
            $0.maxAttempts = 1
            $0.maxConnectionsPerDownload = 4
        }
        let url = "http://o.test/f?a=1&sig=secret"
        var id: String
        let body = EngineFixture.body(3000)
        switch stage {
        case .queued:
            _ = try engine.request(DownloadRequest(url: "http://o.test/first"))
            try await withTimeout(5) { await driver.waitForStarts(1) }
            id = try engine.request(DownloadRequest(url: url)).snapshot.id
        case .downloading, .segmented:
            var request = DownloadRequest(url: url)
            if stage == .segmented { request.connections = 4 }
            let r = try engine.request(request)
            id = r.snapshot.id
            try await withTimeout(5) { await driver.waitForStarts(1) }
            #expect(driver.transfer(0).respond(200, ["Content-Length": "3000", "ETag": "\"v1\""]))
            try driver.transfer(0).send(Array(body.prefix(1200)))
            _ = try engine.request(DownloadRequest(url: url))
        case .waitingForSpace:
            // The disk fills; the look that follows finds room and asks the origin again (no answer yet).
            id = try engine.request(DownloadRequest(url: url)).snapshot.id
            try await withTimeout(5) { await driver.waitForStarts(1) }
            #expect(driver.transfer(0).respond(200, ["Content-Length": "3000", "ETag": "\"v1\""]))
            try driver.transfer(0).send(Array(body.prefix(1200)))
            driver.transfer(0).fail(.disk, "write: No space left on device", code: ENOSPC)
            try await withTimeout(5) { await driver.waitForStarts(2) }
        case .paused:
            id = try await EngineFixture.partial(engine, driver: driver, url: url, headers: ["Content-Length": "3000", "ETag": "\"v1\""],
                                                 sending: Array(body.prefix(1000))).snapshot.id
        case .completed, .failed:
            let rid = try engine.request(DownloadRequest(url: url)).snapshot.id
            id = rid
            try await withTimeout(5) { await driver.waitForStarts(1) }
            if stage == .completed {
                #expect(driver.transfer(0).respond(200, ["Content-Length": "3000"]))
                try driver.transfer(0).send(body)
                driver.transfer(0).finish()
            } else {
                _ = driver.transfer(0).respond(404)  // a 404 ends the attempt at once
            }
            _ = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: rid, [stage == .completed ? .completed : .failed]) }
        }
        let (local, stored) = try engine.core.locked { () throws -> (DownloadSnapshot, StoredDownload) in
            let record = try #require(engine.core.byID[id])
            return (engine.core.freshSnapshot(record), record.stored())
        }
        await engine.shutdown()
        return (local, stored)
    }

    @Test(arguments: Stage.allCases)
    func aRowWithItsHoldersHeartbeatShowsTheHoldersSnapshot(stage: Stage) async throws {
        let (local, stored) = try await Self.download(in: stage)
        #expect(local.url == "http://o.test/f?a=1&sig=REDACTED" || stage == .queued)
        let row = ClusterRow(stored: stored, heartbeat: Heartbeat(leaseKey: "k", epoch: 3, snapshot: local))
        #expect(row.snapshot(ignoring: ["sig"]) == local, "\(stage)")
        if stage == .downloading { #expect(local.bytesWritten == 1200 && local.callers == 2 && local.state == .downloading) }
        if stage == .segmented { #expect(local.connections != nil) }
        if stage == .waitingForSpace { #expect(local.reason == "disk_full" && local.state == .downloading) }
    }

    @Test func theHoldersHeartbeatsAreItsSnapshots() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try engine.request(DownloadRequest(url: "http://o.test/held"))
        try await withTimeout(5) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "3000"]))
        try driver.transfer(0).send(EngineFixture.body(700))
        let beats = engine.core.heartbeats(of: [r.snapshot.id: ("key-1", 4), "not-here": ("key-2", 1)])
        let snapshot = try #require(engine.snapshot(id: r.snapshot.id))
        #expect(beats.count == 1 && beats.first?.bytesWritten == 700 && beats.first?.callers == 1)
        // The snapshot's values (the rate decays between the two snapshots: compared apart).
        var beat = try #require(beats.first)
        (beat.bytesPerSecond, beat.etaSeconds) = (snapshot.bytesPerSecond, snapshot.etaSeconds)
        #expect(beat == Heartbeat(leaseKey: "key-1", epoch: 4, snapshot: snapshot))
        await engine.shutdown()
    }

    /// A download nobody runs (paused, ended) is shown from its row alone, as a restarted engine shows it.
    @Test(arguments: [Stage.paused, .completed, .failed])
    func aRowWithoutHeartbeatShowsTheSnapshotOfAnEndedDownload(stage: Stage) async throws {
        let (local, stored) = try await Self.download(in: stage)
        #expect(ClusterRow(stored: stored).snapshot(ignoring: ["sig"]) == local, "\(stage)")
    }

    static func view(_ state: DownloadState, bytes: Int64 = 0, callers: Int = 1, generation: UInt64 = 1) -> RelayDiff.View {
        let at = Date(timeIntervalSince1970: 1_000)
        return RelayDiff.View(snapshot: DownloadSnapshot(id: "d", url: "http://o/f", state: state, storage: .cache, bytesWritten: bytes,
                                                         callers: callers, createdAt: at, updatedAt: at,
                                                         pausedBy: state == .paused ? .callers : nil), generation: generation)
    }

    @Test(arguments: [
        (view(.downloading, bytes: 10), view(.downloading, bytes: 10), "-"),
        (view(.downloading, bytes: 10), view(.downloading, bytes: 20), "progress"),
        (view(.downloading, bytes: 10), view(.downloading, bytes: 10, callers: 2), "progress"),
        (view(.queued), view(.downloading, bytes: 5), "resumed 0 false"),
        (view(.paused, bytes: 300), view(.downloading, bytes: 400), "resumed 300 false"),
        (view(.paused, bytes: 300), view(.downloading, bytes: 100, generation: 2), "resumed 0 true"),
        (view(.downloading, bytes: 300), view(.downloading, bytes: 10, generation: 2), "resumed 0 true"),
        (view(.downloading, bytes: 300), view(.paused, bytes: 300, callers: 0), "paused"),
        (view(.paused), view(.queued), "progress"),
        (view(.downloading, bytes: 300), view(.completed, bytes: 900), "completed"),
        (view(.downloading, bytes: 300), view(.failed, bytes: 300), "failed"),
    ])
    func aRelayPublishesWhatChanged(before: RelayDiff.View, after: RelayDiff.View, expected: String) {
        let events = RelayDiff.events(from: before, to: after)
        let shown = events.map { event -> String in
            switch event {
            case .progress: "progress"
            case .resumed(let offset, let restarted, _): "resumed \(offset) \(restarted)"
            case .paused: "paused"
            case .completed: "completed"
            case .failed: "failed"
            case .removed(let by, _): "removed \(by)"
            }
        }
        #expect((shown.isEmpty ? ["-"] : shown) == [expected])
        #expect(events.allSatisfy { $0.snapshot == after.snapshot })
    }

    @Test func aVanishedRowIsRemovedWithItsLastSnapshotByWhomItsTombstoneSays() {
        let before = Self.view(.paused, bytes: 7)
        for by in RemovalCause.allCases {
            #expect(RelayDiff.events(from: before, to: nil, removedBy: by) == [.removed(by: by, before.snapshot)])
        }
        #expect(RelayDiff.events(from: before, to: nil) == [.removed(by: .retention, before.snapshot)],
                "no tombstone: forgotten by the service's own bounds")
    }
}
