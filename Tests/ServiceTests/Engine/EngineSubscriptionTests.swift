import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

@Suite struct EngineSubscriptionTests {
    @Test func slowSubscriberSeesLatestProgressAndEveryLifecycleEvent() async throws {
        let driver = FakeTransferDriver()
        let clock = ManualScheduler()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.progressInterval = 0.1 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        #expect(engine.statistics.subscribers == 1)
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let t = driver.transfer(0)
        #expect(t.respond(200, ["Content-Length": "100000", "ETag": "\"a\""]))
        // 100 writes, the clock moving 0.05 s each: at most one progress per 0.1 s is emitted,
        // and the subscriber (not reading) only keeps the newest.
        for _ in 0..<100 {
            clock.advance(0.05)
            try t.send([UInt8](repeating: 7, count: 1000))
        }
        // The trailing progress tells the last bytes one interval later (timers run on the manual
        // clock). Its timer can be armed by another thread's drain of the last write's effects:
        // time moves once it is pending.
        try await withTimeout(20) { await clock.waitForTimers(1) }
        clock.advance(0.1)
        var events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.snapshot.bytesWritten == 100_000 } }
        t.finish()
        events += try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        let kinds = events.map { e -> String in
            switch e {
            case .progress: return "progress"
            case .resumed: return "resumed"
            case .paused: return "paused"
            case .completed: return "completed"
            case .failed: return "failed"
            case .removed: return "removed"
            }
        }
        #expect(kinds == ["progress", "resumed", "progress", "completed"], "\(kinds)")
        if case .progress(let p) = events[2] {
            #expect(p.bytesWritten == 100_000)
            #expect(p.bytesExpected == 100_000)
            #expect(p.bytesPerSecond > 0)
            #expect(p.etaSeconds != nil)
        }
        #expect(engine.statistics.subscribers == 0)
    }

    /// A subscriber that reads nothing until the download completed gets the current snapshot it
    /// subscribed with, every lifecycle event, and no progress older than the lifecycle event after it.
    @Test func progressBeforeALifecycleEventIsDroppedButNotTheFirstEvent() async throws {
        let driver = FakeTransferDriver()
        let clock = ManualScheduler()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.progressInterval = 0.1 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let t = driver.transfer(0)
        #expect(t.respond(200, ["Content-Length": "2000"]))
        clock.advance(0.2)
        try t.send([UInt8](repeating: 7, count: 1000))
        clock.advance(0.2)
        try t.send([UInt8](repeating: 7, count: 1000))
        t.finish()
        _ = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: r.snapshot.id, [.completed]) }
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { $0.isTerminal } }
        #expect(events.count == 3, "\(events)")
        if case .progress(let first)? = events.first { #expect(first.bytesWritten == 0) } else { Issue.record("\(events)") }
        if case .resumed? = events.dropFirst().first {} else { Issue.record("\(events)") }
        if case .completed(let last)? = events.last { #expect(last.bytesWritten == 2000) } else { Issue.record("\(events)") }
    }

    @Test func progressIsPacedPerInterval() async throws {
        let driver = FakeTransferDriver()
        let clock = ManualScheduler()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver, scheduler: clock) { $0.progressInterval = 0.1 }
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let t = driver.transfer(0)
        #expect(t.respond(200, ["Content-Length": "10000"]))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        let reader = Task { await EngineFixture.events(sub) { $0.isTerminal } }
        for i in 0..<10 {
            if i % 5 == 0 { clock.advance(0.1) }  // two intervals in total
            try t.send([UInt8](repeating: 1, count: 1000))
        }
        t.finish()
        let events = try await withTimeout(20) { await reader.value }
        let progress = events.dropFirst().filter { if case .progress = $0 { return true } else { return false } }
        // One per elapsed interval (two), plus at most one trailing event carrying the last bytes.
        #expect(progress.count <= 3, "\(events.count) events")
    }

    @Test func cancellingTheConsumingTaskEndsTheSubscription() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        let second = try #require(engine.subscribe(id: r.snapshot.id))
        #expect(engine.statistics.subscribers == 2)
        let reader = Task { () -> Int in
            var n = 0
            for await _ in sub { n += 1 }
            return n
        }
        try await withTimeout(20) { await driver.waitForStarts(1) }
        reader.cancel()
        // The check: the reader's loop ends (bounded), its stream finished by the cancellation.
        _ = try await withTimeout(20) { await reader.value }
        #expect(engine.statistics.subscribers == 1)
        _ = second
    }

    @Test func endedDownloadGivesItsTerminalEventThenEnds() async throws {
        let driver = FakeTransferDriver { _, _ in .init(status: 410, headers: [:], body: []) }
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try engine.request(DownloadRequest(url: "http://o.test/gone"))
        _ = try await withTimeout(20) { try await EngineFixture.waitFor(engine, id: r.snapshot.id, [.failed]) }
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        var events: [DownloadEvent] = []
        for await e in sub { events.append(e) }
        #expect(events.count == 1)
        if case .failed(let s) = events.first { #expect(s.error?.httpStatus == 410) } else { Issue.record("\(events)") }
        #expect(engine.subscribe(id: "nope") == nil)
    }

    @Test func shutdownEndsSubscriptions() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        let reader = Task { await EngineFixture.events(sub) { _ in false } }
        try await withTimeout(20) { await driver.waitForStarts(1) }
        await engine.shutdown()
        let events = try await withTimeout(20) { await reader.value }
        #expect(!events.isEmpty)
        #expect(engine.statistics.subscribers == 0)
        #expect(driver.transfer(0).isCancelled)
    }

    /// A subscriber that reads only after the shutdown still hears where its download stood.
    @Test func aSubscriberReadingAfterShutdownGetsWhatWasPendingThenTheEnd() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let r = try engine.request(DownloadRequest(url: "http://o.test/f"))
        let sub = try #require(engine.subscribe(id: r.snapshot.id))
        try await withTimeout(20) { await driver.waitForStarts(1) }
        await engine.shutdown()
        let events = try await withTimeout(20) { await EngineFixture.events(sub) { _ in false } }
        #expect(!events.isEmpty && events.allSatisfy { $0.snapshot.id == r.snapshot.id }, "\(events)")
    }

    /// A poller that polls again while a push is handing it an event (between the hand and the
    /// waker) never loses that event to the next push: every `resumed` arrives. Bounded in count
    /// and time; the pusher waits for each pair to be taken, so no bound drops anything.
    @Test func aPollerRacingAHandOverLosesNoEvent() async throws {
        let q = SubscriberQueue(id: 1) { _ in }
        let s = DownloadSnapshot(id: "x", url: "u", state: .downloading, storage: .cache, createdAt: Date(), updatedAt: Date())
        let rounds = 5_000
        let seen = Mutex<(resumed: Set<Int64>, taken: Int)>(([], 0))
        let done = Atomic<Bool>(false)
        let poller = Thread {
            let deadline = Date().addingTimeInterval(20)
            while !done.load(ordering: .acquiring) && Date() < deadline {
                if case .event(let event) = q.poll(waker: {}) {
                    seen.withLock {
                        if case .resumed(let offset, _, _) = event { $0.resumed.insert(offset) }
                        $0.taken += 1
                    }
                }
            }
        }
        poller.start()
        // The pusher spins on a thread of its own, never on the cooperative pool other tests wait on.
        let (pushed, lost) = try await onThread { () -> (Int, Int?) in
            let deadline = Date().addingTimeInterval(10)
            var pushed = 0
            var lost: Int?
            for i in 0..<rounds where Date() < deadline && lost == nil {
                q.push(.resumed(offset: Int64(i), restarted: false, s))
                var p = s
                p.bytesWritten = Int64(i)
                q.push(.progress(p))
                pushed = i + 1
                // The pair is taken before the next (the lifecycle bound never drops one); a resumed
                // not taken within 2 s (however loaded the machine) was lost.
                let taken = Date().addingTimeInterval(2)
                while seen.withLock({ $0.resumed.contains(Int64(i)) }) == false && Date() < taken { usleep(1) }
                if seen.withLock({ !$0.resumed.contains(Int64(i)) }) { lost = i }
            }
            return (pushed, lost)
        }
        done.store(true, ordering: .releasing)
        #expect(pushed > 100)
        #expect(lost == nil, "resumed \(lost ?? -1) never arrived")
    }

    @Test func queueConflatesProgressAndBoundsLifecycle() async {
        let q = SubscriberQueue(id: 1) { _ in }
        let s = DownloadSnapshot(id: "x", url: "u", state: .downloading, storage: .cache, createdAt: Date(), updatedAt: Date())
        for i in 0..<100 {
            var p = s
            p.bytesWritten = Int64(i)
            q.push(.progress(p))
            if i % 2 == 0 { q.push(.resumed(offset: Int64(i), restarted: false, s)) }
        }
        #expect(q.pendingCount <= 2 * SubscriberQueue.lifecycleLimit + 1)
        var lifecycle = 0
        var previousWasProgress = false
        var newest: Int64 = -1
        while q.pendingCount > 0 {
            let e = await q.next()
            if case .progress(let p) = e {
                #expect(!previousWasProgress)
                previousWasProgress = true
                newest = p.bytesWritten
            } else {
                lifecycle += 1
                previousWasProgress = false
            }
        }
        #expect(lifecycle == SubscriberQueue.lifecycleLimit)
        #expect(newest == 99)
    }
}
