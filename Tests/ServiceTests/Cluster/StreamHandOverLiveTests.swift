import Foundation
import Glibc
import Testing
@testable import DownloadService
@testable import DownloaderEngine

/// Progress streams survive a change of holder, live: engines in one process, each its own replica,
/// on one real PostgreSQL and one shared directory (`ClusterLeaseLiveTests.replica`). A stream
/// opened on the holder goes on (relayed from the database) once the holder lets the download go,
/// and one relayed on another replica goes on once that replica holds it; both end with `completed`.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(3)))
struct StreamHandOverLiveTests {
    typealias Live = ClusterLeaseLiveTests

    /// Every event of `subscription` until it ends (at most `seconds` in all), polled from this thread.
    static func drain(_ subscription: DownloadSubscription, within seconds: Double) -> (events: [DownloadEvent], ended: Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        var events: [DownloadEvent] = []
        while Date() < deadline {
            let ready = DispatchSemaphore(value: 0)
            switch subscription.poll(waker: { ready.signal() }) {
            case .event(let event): events.append(event)
            case .end: return (events, true)
            case .wait: _ = ready.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow))
            }
        }
        return (events, false)
    }

    static func names(_ events: [DownloadEvent]) -> [String] { events.map(DownloadAPI.eventName) }

    /// The lifecycle events in order, each progress run shown once.
    static func story(_ events: [DownloadEvent]) -> [String] {
        names(events).reduce(into: []) { out, name in if out.last != name { out.append(name) } }
    }

    @Test func streamsOnTheOldAndTheNewHolderFollowAPauseAndAResumeElsewhereToCompleted() async throws {
        // Leases of 10 s: no renewal missed on a loaded machine moves the download before the pause does.
        try await Live.withReplicas(ttl: 10) { c, database, origin, a, b in
            let first = try a.request(DownloadRequest(url: origin.url))
            let id = first.snapshot.id
            let onA = try c.require(a.subscribe(id: id), "a holds it: its own stream")
            c.expect(Live.wait(10) { (b.snapshot(id: id)?.bytesWritten ?? 0) >= 128 << 10 }, "b reads the heartbeat")
            let onB = try c.require(b.subscribe(id: id), "b relays it from the database")
            c.expect(a.cancel(token: first.token)?.state == .paused)
            try c.expect(try Live.wait(5) { try Live.letGo(a, database) }, "a lets the paused download go")
            let second = try b.request(DownloadRequest(url: origin.url))
            c.expect(second.snapshot.id == id && b.placement(ofID: id) == .here, "b holds it now")

            let (seenOnA, endedOnA) = Self.drain(onA, within: 30)
            let (seenOnB, endedOnB) = Self.drain(onB, within: 10)
            c.expect(endedOnA && endedOnB, "both streams end")
            let storyA = Self.story(seenOnA)
            c.expect(storyA.first == "progress" && storyA.contains("paused") && storyA.last == "completed", "a: \(storyA)")
            c.expect(Self.story(seenOnB).last == "completed", "b: \(Self.story(seenOnB))")
            for (replica, seen) in [("a", seenOnA), ("b", seenOnB)] {
                // Each lifecycle event once: the transfer starting, the pause, its resumption, the end.
                let lifecycle = Self.names(seen).filter { $0 != "progress" }
                c.expect(lifecycle.filter { $0 == "paused" }.count <= 1 && lifecycle.filter { $0 == "completed" }.count == 1,
                         "\(replica): \(lifecycle)")
                if let paused = lifecycle.firstIndex(of: "paused") {
                    c.expect(Array(lifecycle[paused...]) == ["paused", "resumed", "completed"], "\(replica): \(lifecycle)")
                }
                if case .completed(let done)? = seen.last {
                    c.expect(done.bytesWritten == 3 << 20 && done.sha256 != nil, "\(replica): \(done)")
                }
            }
            c.expect(Live.wait(5) { a.statistics.subscribers == 0 && b.statistics.subscribers == 0 })
        }
    }

    @Test func aStreamOnAHolderThatLostItsLeaseFollowsTheTakeoverToCompleted() async throws {
        try await Live.withReplicas { c, database, origin, a, b in
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            let onA = try c.require(a.subscribe(id: id))
            try c.expect(try Live.wait(10) { (try Live.leaseRow(database)?.durable ?? 0) >= 256 << 10 }, "a checkpoint reached the lease row")
            a.core.clusterAbandonForTests()
            let (seen, ended) = Self.drain(onA, within: 30)
            c.expect(ended, "the stream ends")
            // The row goes on `downloading` under b (a state the relay does not see change): progress, then the end.
            let story = Self.story(seen)
            c.expect(!story.contains("paused") && !story.contains("failed") && story.last == "completed", "\(story)")
            let bytes = seen.map(\.snapshot.bytesWritten)
            c.expect(seen.count >= 3 && bytes.dropLast().last ?? 0 > bytes.first ?? 0, "progress came after the takeover: \(bytes)")
            c.expect(b.statistics.cluster?.takeovers == 1, "b took it over")
            if case .completed(let done)? = seen.last { c.expect(done.bytesWritten == 3 << 20, "\(done)") }
        }
    }
}
