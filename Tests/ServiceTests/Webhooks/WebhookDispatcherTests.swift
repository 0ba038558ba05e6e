import Foundation
import Testing
@testable import DownloaderEngine

/// The dispatcher with its real journal, real libcurl poster and a real receiver on loopback; time
/// is a `ManualScheduler` the tests drive (no test sleeps for a retry), jitter fixed at the middle.
@Suite struct WebhookDispatcherTests {
    final class Harness: @unchecked Sendable {
        let root = EngineFixture.root()
        let scheduler = ManualScheduler()
        let reports = OriginLock<[WebhookReport]>([])
        var journalPath: String { root.appendingPathComponent("state.db").path }

        /// The download's state; nil once it is gone (removed).
        let state = OriginLock<DownloadState?>(.completed)

        func dispatcher(egress: EgressRules = EgressRules(allowPrivateNetworks: true), state: DownloadState = .completed,
                        scheduler: ManualScheduler? = nil) throws -> WebhookDispatcher {
            self.state.withLock { $0 = state }
            let current = self.state
            let dispatcher = try WebhookDispatcher(journal: WebhookJournal(path: journalPath), poster: CurlWebhookPoster(egress: egress),
                                                   scheduler: scheduler ?? self.scheduler, random: FixedRandom(unit: 0.5), egress: egress,
                                                   lookup: { id in
                                                       guard id == Self.snapshot(.completed).id, let state = current.withLock({ $0 }) else { return nil }
                                                       return Self.snapshot(state)
                                                   })
            let reports = self.reports
            dispatcher.start(WebhookSettings(
                render: { event, id, snapshot in Array(#"{"deliveryId":"\#(id)","download":"\#(snapshot.id)","event":"\#(event.rawValue)"}"#.utf8) },
                secret: Array("s3cret".utf8), userAgent: "download-service/test", report: { report in reports.withLock { $0.append(report) } }))
            return dispatcher
        }

        static func snapshot(_ state: DownloadState) -> DownloadSnapshot {
            DownloadSnapshot(id: "dl1", url: "https://origin.example/f", state: state, storage: .cache,
                             createdAt: Date(timeIntervalSince1970: 1_800_000_000), updatedAt: Date(timeIntervalSince1970: 1_800_000_000))
        }

        func waitForReports(_ count: Int) async throws -> [WebhookReport] {
            try await withTimeout(20) {
                while true {
                    let got = self.reports.withLock { $0 }
                    if got.count >= count { return got }
                    try await Task.sleep(nanoseconds: 10_000_000)
                }
            }
        }

        /// A dispatcher with one registration whose first try `receiver` failed: its retry is armed, due in 1 s.
        func firstTryFailed(to receiver: WebhookReceiver) async throws {
            let first = try dispatcher()
            try first.register(CallbackRequest(url: receiver.url()), token: "caller-1", snapshot: Self.snapshot(.completed))
            scheduler.advance(0)
            _ = try await receiver.waitFor(1)
            try await waitForTimer(dueIn: 1)
        }

        func waitForTimer(dueIn seconds: Double, on scheduler: ManualScheduler? = nil) async throws {
            let scheduler = scheduler ?? self.scheduler
            try await withTimeout(20) { await scheduler.waitForTimer(dueIn: seconds) }
        }
    }

    @Test func failsTwiceThenDeliversTheSameIDThreeTimes() async throws {
        let receiver = try WebhookReceiver(answers: [.init(status: 500), .init(status: 302)])
        defer { receiver.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher()
        try dispatcher.register(CallbackRequest(url: receiver.url("/hook?token=abc")), token: "caller-1", snapshot: Harness.snapshot(.completed))
        let registration = try #require(dispatcher.lock.withLock { dispatcher.registrations.all.first?.id })
        h.scheduler.advance(0)  // the first try goes out at once
        _ = try await receiver.waitFor(1)
        try await h.waitForTimer(dueIn: 1)
        h.scheduler.advance(1)
        _ = try await receiver.waitFor(2)
        try await h.waitForTimer(dueIn: 2)
        h.scheduler.advance(2)
        let got = try await receiver.waitFor(3)
        let reports = try await h.waitForReports(1)
        #expect(got.count == 3)
        let ids = Set(got.map { $0.headers["x-delivery-id"] ?? "" })
        #expect(ids.count == 1 && ids.first?.hasPrefix("dlv_") == true)
        // Derived from the registration and the event: made again (its store failed, then a crash),
        // the delivery would carry the same id.
        #expect(ids.first == WebhookDelivery.id(registrationID: registration, event: .completed))
        #expect(WebhookDelivery.id(registrationID: registration, event: .failed) != ids.first)
        for request in got {
            #expect(request.method == "POST" && request.target == "/hook?token=abc")
            #expect(request.json?["deliveryId"] as? String == ids.first && request.json?["event"] as? String == "completed")
            #expect(request.headers["content-type"] == "application/json" && request.headers["user-agent"] == "download-service/test")
            #expect(request.headers["x-signature-256"] == "sha256=" + HMACSHA256.hex(key: Array("s3cret".utf8), message: request.body))
            #expect(request.body == got[0].body)
        }
        #expect(reports.map(\.outcome) == [.delivered] && reports[0].tries == 3 && reports[0].shownURL == "http://127.0.0.1:\(receiver.port)")
        #expect(dispatcher.statistics.tries == 3 && dispatcher.statistics.deliveries == [.delivered: 1])
        #expect(dispatcher.counts.registrations == 0 && dispatcher.counts.pending == 0)  // done: the download completed
        #expect(try WebhookJournal(path: h.journalPath).load().registrations.isEmpty)
    }

    /// A try's result saved after its registration was removed (a caller's `DELETE` racing the
    /// try) writes no row; rows such a race left before are deleted at load. They stayed for good.
    @Test func aDeliveryOfARemovedRegistrationIsNeverStored() throws {
        let h = Harness()
        let journal = try WebhookJournal(path: h.journalPath)
        let registration = WebhookRegistration(id: "wh_1", downloadID: "dl1", tokenHash: TokenHash(token: "t"), url: "http://127.0.0.1:9/",
                                               events: [.completed], createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        let delivery = WebhookDelivery(id: WebhookDelivery.id(registrationID: "wh_1", event: .completed), registrationID: "wh_1",
                                       event: .completed, body: Array("{}".utf8), tries: 1, nextAt: Date(timeIntervalSince1970: 1_800_000_001))
        try journal.insert(registration)
        try journal.save(delivery)
        #expect(try journal.load().deliveries == [delivery])
        try journal.remove(registrations: ["wh_1"])
        var late = delivery
        late.tries = 2
        try journal.save(late)
        let raw = try SQLiteConnection(path: h.journalPath)
        #expect(try raw.text("SELECT count(*) FROM webhook_deliveries") == "0")
        try raw.execute("INSERT INTO webhook_deliveries (id, registration, event, body, tries, next_at) VALUES ('dlv_x', 'wh_gone', 'completed', x'7b7d', 1, 0)")
        #expect(try journal.load().deliveries.isEmpty)
        #expect(try raw.text("SELECT count(*) FROM webhook_deliveries") == "0")
    }

    @Test func retryAfterOfAtMostAnHourReplacesTheDelay() async throws {
        let receiver = try WebhookReceiver(answers: [.init(status: 503, retryAfter: "120"), .init(status: 429, retryAfter: "7200")])
        defer { receiver.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher()
        try dispatcher.register(CallbackRequest(url: receiver.url()), token: "caller-1", snapshot: Harness.snapshot(.completed))
        h.scheduler.advance(0)
        _ = try await receiver.waitFor(1)
        try await h.waitForTimer(dueIn: 120)
        h.scheduler.advance(119.9)
        #expect(receiver.received.count == 1)
        h.scheduler.advance(0.1)
        _ = try await receiver.waitFor(2)
        try await h.waitForTimer(dueIn: 2)  // more than an hour: ignored, the computed delay stands
        h.scheduler.advance(2)
        _ = try await receiver.waitFor(3)
        #expect(try await h.waitForReports(1).map(\.outcome) == [.delivered])
    }

    @Test func givesUpAfterTwelveTriesAndSaysWhy() async throws {
        let receiver = try WebhookReceiver(answers: Array(repeating: .init(status: 500), count: 12))
        defer { receiver.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher()
        try dispatcher.register(CallbackRequest(url: receiver.url()), token: "caller-1", snapshot: Harness.snapshot(.completed))
        h.scheduler.advance(0)
        for tries in 1..<12 {
            _ = try await receiver.waitFor(tries)
            let delay = pow(2, Double(tries - 1))
            try await h.waitForTimer(dueIn: delay)
            h.scheduler.advance(delay)
        }
        let report = try await h.waitForReports(1)[0]
        #expect(receiver.received.count == 12 && Set(receiver.received.map { $0.headers["x-delivery-id"] }).count == 1)
        #expect(report.outcome == .gaveUp && report.tries == 12 && report.reason?.contains("answered 500") == true)
        #expect(h.scheduler.pendingCount == 0)
        #expect(dispatcher.statistics.deliveries == [.gaveUp: 1] && dispatcher.statistics.tries == 12)
    }

    @Test func refusedHostsAreRefusedBeforeAndAtConnectTime() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let h = Harness()
        let egress = try EgressRules(allowPrivateNetworks: true, allow: [], deny: ["127.0.0.0/8", "::1"])
        let dispatcher = try h.dispatcher(egress: egress)
        do throws(EngineError) {
            try dispatcher.screen(CallbackRequest(url: receiver.url()))
            Issue.record("a denied address literal passed the screen")
        } catch {
            #expect(error.code == .destinationForbidden && error.message.contains("127.0.0.1"), "\(error)")
        }
        // The grammar of download URLs holds for callbacks too.
        for bad in ["http://h/a b", "http://user:pw@h/", "http://h:99999/", "mailto:x@h"] {
            #expect(throws: EngineError.self) { try dispatcher.screen(CallbackRequest(url: bad)) }
        }
        // A name passes the screen; the address it connects to is refused: ended at once, not retried.
        let byName = CallbackRequest(url: "http://localhost:\(receiver.port)/hook")
        try dispatcher.screen(byName)
        try dispatcher.register(byName, token: "caller-1", snapshot: Harness.snapshot(.completed))
        h.scheduler.advance(0)
        let report = try await h.waitForReports(1)[0]
        #expect(report.outcome == .forbidden && report.tries == 1 && report.reason?.contains("destination forbidden") == true, "\(report)")
        #expect(receiver.received.isEmpty && h.scheduler.pendingCount == 0)
        #expect(dispatcher.statistics.deliveries == [.forbidden: 1])
    }

    /// A host refused by name at try time (rules made stricter since the callback was registered)
    /// ends the delivery as forbidden, not as a lookup failure to retry.
    @Test func aHostRefusedByNameAtTryTimeIsForbidden() throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let egress = try EgressRules(allowPrivateNetworks: true, allow: [], deny: ["localhost"])
        let result = CurlWebhookPoster(egress: egress).post(url: "http://localhost:\(receiver.port)/hook", headers: [], body: [1],
                                                           timeout: 5)
        guard case .forbidden(let reason) = result else { Issue.record("\(result)"); return }
        #expect(reason.contains("destination forbidden"))
        #expect(receiver.received.isEmpty)
    }

    @Test func aPendingDeliveryCarriesOnAfterARestart() async throws {
        let receiver = try WebhookReceiver(answers: [.init(status: 500)])
        defer { receiver.stop() }
        let h = Harness()
        try await h.firstTryFailed(to: receiver)
        // A new process: the same state database, its own timers; the first one's never fire.
        let later = ManualScheduler()
        let second = try h.dispatcher(scheduler: later)
        #expect(second.counts.registrations == 1 && second.counts.pending == 1)
        try await h.waitForTimer(dueIn: 1, on: later)
        later.advance(1)
        let got = try await receiver.waitFor(2)
        #expect(got[0].headers["x-delivery-id"] == got[1].headers["x-delivery-id"] && got[0].body == got[1].body)
        #expect(try await h.waitForReports(1).map(\.tries) == [2])
    }

    /// A delivery's next try stored while the wall clock ran a day ahead (corrected before the
    /// restart) waits at most the schedule's longest delay, not the day.
    @Test func aStoredNextTryIsNeverFurtherOffThanTheSchedulesLongestDelay() async throws {
        let receiver = try WebhookReceiver(answers: [.init(status: 500)])
        defer { receiver.stop() }
        let h = Harness()
        try await h.firstTryFailed(to: receiver)
        let journal = try WebhookJournal(path: h.journalPath)
        var stored = try #require(try journal.load().deliveries.first)
        let later = ManualScheduler()
        stored.nextAt = later.now().addingTimeInterval(86_400)
        try journal.save(stored)
        let second = try h.dispatcher(scheduler: later)
        #expect(second.counts.pending == 1)
        let longest = WebhookSchedule().longestDelay
        #expect(longest >= 3600 && longest < 86_400)
        try await h.waitForTimer(dueIn: longest, on: later)
        later.advance(longest)
        _ = try await receiver.waitFor(2)
    }

    @Test func eachCallerGetsItsOwnDeliveryAndACancelledCallerNone() async throws {
        let receiver = try WebhookReceiver(answers: [.init(status: 500), .init(status: 500)])
        defer { receiver.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher()
        try dispatcher.register(CallbackRequest(url: receiver.url("/a")), token: "caller-a", snapshot: Harness.snapshot(.completed))
        try dispatcher.register(CallbackRequest(url: receiver.url("/b")), token: "caller-b", snapshot: Harness.snapshot(.completed))
        h.scheduler.advance(0)
        let first = try await receiver.waitFor(2)
        #expect(Set(first.map(\.target)) == ["/a", "/b"] && Set(first.map { $0.headers["x-delivery-id"] }).count == 2)
        try await withTimeout(20) { await h.scheduler.waitForTimers(2) }
        dispatcher.drop(token: "caller-b")  // caller b cancels its token: its pending delivery goes
        #expect(dispatcher.counts.registrations == 1 && h.scheduler.pendingCount == 1)
        h.scheduler.advance(1)
        let all = try await receiver.waitFor(3)
        #expect(all[2].target == "/a")
        #expect(try await h.waitForReports(1).count == 1)
        // The same event again (the engine redoing a completion after a crash) makes no second delivery.
        dispatcher.settle(Harness.snapshot(.completed), registrationIDs: nil)
        h.scheduler.advance(10)
        #expect(receiver.received.count == 3)
    }

    /// A removed download's callbacks go; one whose delivery is under way first delivers it (the
    /// event happened: a caller waiting for `failed` must hear it), then goes.
    @Test func aRemovedDownloadsCallbacksGoOnceTheirDeliveriesEnded() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher(state: .downloading)
        try dispatcher.register(CallbackRequest(url: receiver.url("/a")), token: "t1", snapshot: Harness.snapshot(.downloading))
        try dispatcher.register(CallbackRequest(url: receiver.url("/b"), events: [.completed]), token: "t2",
                                snapshot: Harness.snapshot(.downloading))
        dispatcher.downloadEnded(Harness.snapshot(.failed))
        try await withTimeout(20) { await h.scheduler.waitForTimers(1) }  // /a's failed delivery armed, not tried
        #expect(dispatcher.counts.registrations == 2 && dispatcher.counts.pending == 1)
        h.state.withLock { $0 = nil }
        dispatcher.downloadRemoved(id: Harness.snapshot(.downloading).id)
        try await withTimeout(5) { while dispatcher.counts.registrations > 1 { try await Task.sleep(nanoseconds: 5_000_000) } }
        #expect(dispatcher.counts.pending == 1, "the delivery under way stays")
        h.scheduler.advance(0)
        let got = try await receiver.waitFor(1)
        #expect(got.first?.target == "/a" && got.first?.json?["event"] as? String == "failed")
        #expect(try await h.waitForReports(1).map(\.outcome) == [.delivered])
        try await withTimeout(5) { while dispatcher.counts.registrations > 0 { try await Task.sleep(nanoseconds: 5_000_000) } }
        #expect(dispatcher.counts.pending == 0)
    }

    /// A receiver that takes tries and never answers holds two workers at most: another
    /// receiver's delivery goes out at once (it waited for a try's whole timeout per four before).
    @Test func aSilentReceiverDoesNotHoldUpAnotherOnesDeliveries() async throws {
        let silent = try WebhookReceiver(answers: Array(repeating: .init(status: 200, held: true), count: 8))
        let good = try WebhookReceiver()
        defer { silent.stop(); good.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher(state: .downloading)
        for n in 0..<8 {
            try dispatcher.register(CallbackRequest(url: silent.url("/s\(n)")), token: "t\(n)", snapshot: Harness.snapshot(.downloading))
        }
        h.state.withLock { $0 = .completed }
        dispatcher.downloadEnded(Harness.snapshot(.completed))
        try await withTimeout(20) { await h.scheduler.waitForTimers(8) }
        h.scheduler.advance(0)
        _ = try await silent.waitFor(2)  // two tries held by the silent receiver, six waiting behind them
        // Another host (the same machine by another name: lanes go by host).
        try dispatcher.register(CallbackRequest(url: "http://localhost:\(good.port)/g"), token: "tg", snapshot: Harness.snapshot(.completed))
        h.scheduler.advance(0)
        let got = try await good.waitFor(1, timeout: 5)
        #expect(got.first?.target == "/g")
        #expect(silent.received.count == 2, "at most two tries at once for one receiver")
    }

    @Test func onlyTheEventsAskedForAreDelivered() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let h = Harness()
        let dispatcher = try h.dispatcher(state: .downloading)
        try dispatcher.register(CallbackRequest(url: receiver.url("/failed-only"), events: [.failed]), token: "t1",
                                snapshot: Harness.snapshot(.downloading))
        try dispatcher.register(CallbackRequest(url: receiver.url("/both")), token: "t2", snapshot: Harness.snapshot(.downloading))
        #expect(dispatcher.counts.registrations == 2 && dispatcher.counts.pending == 0)
        dispatcher.downloadEnded(Harness.snapshot(.completed))
        try await withTimeout(20) { await h.scheduler.waitForTimers(1) }
        h.scheduler.advance(0)
        let got = try await receiver.waitFor(1)
        _ = try await h.waitForReports(1)
        #expect(got.map(\.target) == ["/both"])
        #expect(dispatcher.counts.registrations == 0)
    }
}
