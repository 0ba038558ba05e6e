import Foundation
import Testing
@testable import DownloaderEngine

/// `SubscriberQueueState`'s decisions as tables: state × input → action and the state after.
@Suite struct SubscriberQueueStateTests {
    // MARK: Notation

    private static let date = Date(timeIntervalSince1970: 1_800_000_000)
    static func p(_ bytes: Int64) -> DownloadEvent {
        var s = DownloadSnapshot(id: "d", url: "u", state: .downloading, storage: .cache, createdAt: date, updatedAt: date)
        s.bytesWritten = bytes
        return .progress(s)
    }
    static let paused = DownloadEvent.paused(DownloadSnapshot(id: "d", url: "u", state: .paused, storage: .cache, createdAt: date, updatedAt: date))
    static let resumed = DownloadEvent.resumed(offset: 0, restarted: false, DownloadSnapshot(id: "d", url: "u", state: .downloading, storage: .cache, createdAt: date, updatedAt: date))
    static let completed = DownloadEvent.completed(DownloadSnapshot(id: "d", url: "u", state: .completed, storage: .cache, createdAt: date, updatedAt: date))

    /// The pacer's clock at every decision below: 10 s; one subscriber at one delivery a second.
    static let now: UInt64 = 10_000_000_000
    static let later = now + 5_000_000_000
    static let pace = ProgressPace(now: now, pacing: ProgressPacing(deliveriesPerSecond: 1, minimumSpacing: 0.1), subscribers: 1)
    static let key: UInt64 = 7

    /// The due time after delivery number `delivery` at `now`.
    static func due(after delivery: UInt64) -> UInt64 {
        now + pace.pacing.spacing(subscribers: 1, queue: key, delivery: delivery)
    }

    static func state(_ pending: [DownloadEvent] = [], waits: Bool = false, started: Bool = true, finished: Bool = false,
                      dueAt: UInt64 = 0, deliveries: UInt64 = 0, deferred: Bool = false, seen: UInt64 = 0) -> SubscriberQueueState {
        var s = SubscriberQueueState(key: key)
        s.progressSeen = seen
        s.pending = pending
        s.consumerWaits = waits
        s.started = started
        s.finished = finished
        s.pacing.dueAt = dueAt
        s.pacing.deliveries = deliveries
        s.pacing.deferred = deferred
        return s
    }

    static func hand(_ event: DownloadEvent?) -> QueueAction { QueueAction(hand: event.map { .event($0) } ?? .end) }

    /// The download's newest recorded progress, as version `version`.
    static func recorded(_ event: DownloadEvent, _ version: UInt64 = 1) -> RecordedProgress {
        RecordedProgress(event: event, version: version)
    }

    enum Input: Sendable {
        case push(DownloadEvent), offer(RecordedProgress), ask(cancelled: Bool, newest: RecordedProgress? = nil, recorded: Bool = true)
        case tick(newest: RecordedProgress?), finish(newest: RecordedProgress?), cancel
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var before: SubscriberQueueState
        var input: Input
        var paced = true
        var action: QueueAction
        var after: SubscriberQueueState
        var testDescription: String { name }
    }

    // MARK: Tables

    static let pushRows: [Row] = [
        Row(name: "progress, nobody waits: queued", before: state(), input: .push(p(1)), action: QueueAction(), after: state([p(1)])),
        Row(name: "progress replaces a pending progress", before: state([resumed, p(1)]), input: .push(p(2)),
            action: QueueAction(), after: state([resumed, p(2)])),
        Row(name: "lifecycle drops a pending progress (older snapshot)", before: state([p(1)]), input: .push(paused),
            action: QueueAction(), after: state([paused])),
        Row(name: "lifecycle keeps the first event, the current snapshot", before: state([p(0)], started: false), input: .push(paused),
            action: QueueAction(), after: state([p(0), paused], started: false)),
        Row(name: "lifecycle drops a later progress before it, not the first", before: state([p(0), resumed, p(1)], started: false),
            input: .push(paused), action: QueueAction(), after: state([p(0), resumed, paused], started: false)),
        Row(name: "terminal, nobody waits: queued, finished, detach", before: state([p(1)]), input: .push(completed),
            action: QueueAction(detach: true), after: state([completed], finished: true)),
        Row(name: "finished: ignored", before: state([completed], finished: true), input: .push(p(1)),
            action: QueueAction(), after: state([completed], finished: true)),
        Row(name: "unpaced, waiting: woken at once", before: state(waits: true), input: .push(p(1)), paced: false,
            action: hand(p(1)), after: state()),
        Row(name: "paced, waiting, due: woken, next due later", before: state(waits: true), input: .push(p(1)),
            action: hand(p(1)), after: state(dueAt: due(after: 1), deliveries: 1)),
        Row(name: "paced, waiting, not due: deferred (no copy), watch until due", before: state(waits: true, dueAt: later, deliveries: 1),
            input: .push(p(2)), action: QueueAction(watchUntil: later), after: state(waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "already deferred: watched once", before: state(waits: true, dueAt: later, deliveries: 1, deferred: true),
            input: .push(p(3)), action: QueueAction(), after: state(waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "lifecycle wakes a deferred consumer at once, pending dropped",
            before: state([p(1)], waits: true, dueAt: later, deliveries: 1, deferred: true), input: .push(paused),
            action: hand(paused), after: state(dueAt: due(after: 2), deliveries: 2)),
        Row(name: "terminal wakes the consumer and detaches", before: state(waits: true), input: .push(completed), paced: false,
            action: QueueAction(hand: .event(completed), detach: true), after: state(finished: true)),
    ]

    /// The registry's progress: only a consumer waiting without a deferred progress takes it.
    static let offerRows: [Row] = [
        Row(name: "offer, nobody waits: not copied (the consumer reads it when it asks)", before: state([resumed]),
            input: .offer(recorded(p(1))), action: QueueAction(), after: state([resumed])),
        Row(name: "offer, waiting, due: woken, seen", before: state(waits: true), input: .offer(recorded(p(1), 4)),
            action: hand(p(1)), after: state(dueAt: due(after: 1), deliveries: 1, seen: 4)),
        Row(name: "offer, waiting, not due: deferred, not seen (the tick hands it)", before: state(waits: true, dueAt: later, deliveries: 1),
            input: .offer(recorded(p(2), 4)), action: QueueAction(watchUntil: later),
            after: state(waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "offer, deferred: nothing", before: state(waits: true, dueAt: later, deliveries: 1, deferred: true),
            input: .offer(recorded(p(2), 4)), action: QueueAction(), after: state(waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "offer, finished: nothing", before: state([completed], waits: true, finished: true), input: .offer(recorded(p(2))),
            action: QueueAction(), after: state([completed], waits: true, finished: true)),
    ]

    static let askRows: [Row] = [
        Row(name: "nothing pending: waits", before: state(), input: .ask(cancelled: false), action: QueueAction(), after: state(waits: true)),
        Row(name: "nothing pending, finished: the end", before: state(finished: true), input: .ask(cancelled: false),
            action: hand(nil), after: state(finished: true)),
        Row(name: "nothing pending, task cancelled: the end", before: state(), input: .ask(cancelled: true),
            action: hand(nil), after: state()),
        Row(name: "pending: the oldest at once", before: state([resumed, p(1)]), input: .ask(cancelled: false),
            action: hand(resumed), after: state([p(1)], dueAt: due(after: 1), deliveries: 1)),
        Row(name: "unpaced: a lone progress at once", before: state([p(1)], dueAt: later), input: .ask(cancelled: false), paced: false,
            action: hand(p(1)), after: state(dueAt: later)),
        Row(name: "paced: a lone progress not due: waits, watch until due", before: state([p(1)], dueAt: later, deliveries: 1),
            input: .ask(cancelled: false), action: QueueAction(watchUntil: later),
            after: state([p(1)], waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "paced: a progress before a terminal event is not held back", before: state([p(0), completed], started: false, finished: true, dueAt: later),
            input: .ask(cancelled: false), action: hand(p(0)), after: state([completed], started: false, finished: true, dueAt: due(after: 1), deliveries: 1)),
        Row(name: "paced, nothing pending, not due: waits for the tick at once", before: state(dueAt: later, deliveries: 1),
            input: .ask(cancelled: false), action: QueueAction(watchUntil: later),
            after: state(waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "a newer record: taken at once when due", before: state(seen: 2), input: .ask(cancelled: false, newest: recorded(p(3), 3)),
            action: hand(p(3)), after: state(dueAt: due(after: 1), deliveries: 1, seen: 3)),
        Row(name: "a newer record, not due: pending, waits for the tick", before: state(dueAt: later, deliveries: 1, seen: 2),
            input: .ask(cancelled: false, newest: recorded(p(3), 3)), action: QueueAction(watchUntil: later),
            after: state([p(3)], waits: true, dueAt: later, deliveries: 1, deferred: true, seen: 3)),
        Row(name: "a record already seen: not again", before: state(seen: 3), input: .ask(cancelled: false, newest: recorded(p(3), 3)),
            action: QueueAction(), after: state(waits: true, seen: 3)),
        Row(name: "a newer record after a pending lifecycle event: the lifecycle event first", before: state([resumed], seen: 2),
            input: .ask(cancelled: false, newest: recorded(p(3), 3)), action: hand(resumed),
            after: state([p(3)], dueAt: due(after: 1), deliveries: 1, seen: 3)),
        Row(name: "a newer record replaces a pending progress", before: state([p(1)], seen: 1),
            input: .ask(cancelled: false, newest: recorded(p(3), 3)), action: hand(p(3)), after: state(dueAt: due(after: 1), deliveries: 1, seen: 3)),
        Row(name: "fed by pushes (the relay): no record taken, and waits for a push when not due",
            before: state(dueAt: later, deliveries: 1), input: .ask(cancelled: false, newest: recorded(p(3), 3), recorded: false),
            action: QueueAction(), after: state(waits: true, dueAt: later, deliveries: 1)),
        Row(name: "cancelled: the record is not taken", before: state(seen: 1), input: .ask(cancelled: true, newest: recorded(p(3), 3)),
            action: hand(nil), after: state(seen: 1)),
    ]

    static let tickRows: [Row] = [
        Row(name: "deferred and due: the newest progress", before: state([p(1)], waits: true, dueAt: now, deliveries: 1, deferred: true),
            input: .tick(newest: recorded(p(3))), action: hand(p(3)), after: state(dueAt: due(after: 2), deliveries: 2, seen: 1)),
        Row(name: "deferred and due, no newest: the pending progress", before: state([p(1)], waits: true, dueAt: now, deliveries: 1, deferred: true),
            input: .tick(newest: nil), action: hand(p(1)), after: state(dueAt: due(after: 2), deliveries: 2)),
        Row(name: "deferred, not due: watch again", before: state(waits: true, dueAt: later, deliveries: 1, deferred: true),
            input: .tick(newest: recorded(p(3))), action: QueueAction(watchUntil: later), after: state(waits: true, dueAt: later, deliveries: 1, deferred: true)),
        Row(name: "woken meanwhile: nothing", before: state(dueAt: later, deliveries: 2), input: .tick(newest: recorded(p(3))),
            action: QueueAction(), after: state(dueAt: later, deliveries: 2)),
        Row(name: "deferred and due, nothing to hand: stops deferring", before: state(waits: true, dueAt: now, deliveries: 1, deferred: true),
            input: .tick(newest: nil), action: QueueAction(), after: state(waits: true, dueAt: now, deliveries: 1)),
        Row(name: "deferred and due, the record already seen: stops deferring (progress is offered again)",
            before: state(waits: true, dueAt: now, deliveries: 1, deferred: true, seen: 3), input: .tick(newest: recorded(p(3), 3)),
            action: QueueAction(), after: state(waits: true, dueAt: now, deliveries: 1, seen: 3)),
        Row(name: "deferred and due, the record already seen, a progress pending: that one",
            before: state([p(3)], waits: true, dueAt: now, deliveries: 1, deferred: true, seen: 3), input: .tick(newest: recorded(p(3), 3)),
            action: hand(p(3)), after: state(dueAt: due(after: 2), deliveries: 2, seen: 3)),
    ]

    static let endRows: [Row] = [
        Row(name: "finish: a deferred progress goes out (the newest), then the end", before: state([p(1)], waits: true, dueAt: later, deferred: true),
            input: .finish(newest: recorded(p(2))), action: QueueAction(hand: .event(p(2)), detach: true), after: state(finished: true, dueAt: later)),
        Row(name: "finish: deferred, the record already seen: the pending one", before: state([p(1)], waits: true, dueAt: later, deferred: true, seen: 1),
            input: .finish(newest: recorded(p(1))), action: QueueAction(hand: .event(p(1)), detach: true), after: state(finished: true, dueAt: later, seen: 1)),
        Row(name: "finish: a waiting consumer without a deferred progress: the end", before: state(waits: true), input: .finish(newest: recorded(p(2))),
            action: QueueAction(hand: .end, detach: true), after: state(finished: true)),
        Row(name: "finish: nobody waits: what is pending stays for the consumer", before: state([paused, p(2)]), input: .finish(newest: nil),
            action: QueueAction(detach: true), after: state([paused, p(2)], finished: true)),
        Row(name: "finish: nobody waits: the newest progress not seen replaces the pending one", before: state([paused, p(1)], seen: 1),
            input: .finish(newest: recorded(p(2), 2)), action: QueueAction(detach: true), after: state([paused, p(2)], finished: true, seen: 2)),
        Row(name: "finish: nobody waits: a progress already seen is not queued again", before: state([paused], seen: 2),
            input: .finish(newest: recorded(p(2), 2)), action: QueueAction(detach: true), after: state([paused], finished: true, seen: 2)),
        Row(name: "finish after the terminal event: no second detach, the event stays", before: state([completed], finished: true),
            input: .finish(newest: nil), action: QueueAction(), after: state([completed], finished: true)),
        Row(name: "cancel: a waiting consumer ends", before: state(waits: true, dueAt: later, deferred: true), input: .cancel,
            action: QueueAction(hand: .end, detach: true), after: state(finished: true, dueAt: later)),
        Row(name: "cancel: pending dropped", before: state([resumed, p(1)]), input: .cancel,
            action: QueueAction(detach: true), after: state(finished: true)),
        Row(name: "cancel after the terminal event: no second detach", before: state([completed], finished: true), input: .cancel,
            action: QueueAction(), after: state(finished: true)),
    ]

    @Test(arguments: pushRows + offerRows + askRows + tickRows + endRows)
    func decision(_ row: Row) {
        var s = row.before
        let pace = row.paced ? Self.pace : nil
        let action: QueueAction
        switch row.input {
        case .push(let event): action = s.push(event, pace: pace)
        case .offer(let recorded): action = s.offer(recorded, pace: pace)
        case .ask(let cancelled, let newest, let recorded): action = s.ask(pace: pace, cancelled: cancelled, newest: newest, recorded: recorded)
        case .tick(let newest): action = s.tick(pace: Self.pace, newest: newest)
        case .finish(let newest): action = s.finish(newest: newest)
        case .cancel: action = s.cancel()
        }
        #expect(action == row.action)
        #expect(s == row.after)
    }

    // MARK: settle: what a consumer that runs gets for what it was handed

    struct SettleRow: Sendable, CustomTestStringConvertible {
        var name: String
        var before: SubscriberQueueState
        var handed: DownloadEvent
        var newest: DownloadEvent?
        var gets: DownloadEvent
        var after: SubscriberQueueState
        var testDescription: String { name }
    }

    static let settleRows: [SettleRow] = [
        SettleRow(name: "lifecycle: as handed", before: state([p(2)], started: false), handed: paused, newest: p(2), gets: paused,
                  after: state([p(2)])),
        SettleRow(name: "progress, nothing pending: the newest", before: state(), handed: p(1), newest: p(3), gets: p(3), after: state()),
        SettleRow(name: "progress, nothing pending, no newest: as handed", before: state(), handed: p(1), newest: nil, gets: p(1), after: state()),
        SettleRow(name: "progress, a progress pending: the newest, pending taken", before: state([p(2)]), handed: p(1), newest: p(3),
                  gets: p(3), after: state()),
        SettleRow(name: "progress, a progress pending, no newest: the pending one", before: state([p(2)]), handed: p(1), newest: nil,
                  gets: p(2), after: state()),
        SettleRow(name: "progress, a lifecycle event pending: superseded by it", before: state([paused]), handed: p(1), newest: p(1),
                  gets: paused, after: state(dueAt: due(after: 1), deliveries: 1)),
        SettleRow(name: "progress, lifecycle then progress pending: the lifecycle event, the progress stays",
                  before: state([resumed, p(2)]), handed: p(1), newest: p(2), gets: resumed,
                  after: state([p(2)], dueAt: due(after: 1), deliveries: 1)),
        SettleRow(name: "the first event, a lifecycle event pending: kept (the current snapshot)",
                  before: state([paused], started: false), handed: p(0), newest: p(1), gets: p(0), after: state([paused])),
        SettleRow(name: "the first event, nothing pending: the newest", before: state(started: false), handed: p(0), newest: p(1),
                  gets: p(1), after: state()),
    ]

    @Test(arguments: settleRows)
    func settle(_ row: SettleRow) {
        var s = row.before
        #expect(s.settle(row.handed, newest: row.newest.map { Self.recorded($0, 0) }, pace: Self.pace) == row.gets)
        #expect(s == row.after)
    }

    /// Lifecycle events beyond the limit: the oldest non-terminal one goes; the terminal one stays.
    @Test func lifecycleEventsAreBounded() {
        var s = Self.state()
        for _ in 0..<SubscriberQueueState.lifecycleLimit { _ = s.push(Self.paused, pace: nil) }
        _ = s.push(Self.p(1), pace: nil)
        _ = s.push(Self.resumed, pace: nil)
        #expect(s.pending.count == SubscriberQueueState.lifecycleLimit)
        #expect(s.pending.last == Self.resumed)
        _ = s.push(Self.completed, pace: nil)
        #expect(s.pending.count == SubscriberQueueState.lifecycleLimit)
        #expect(s.pending.last == Self.completed)
        #expect(s.pending.dropLast(2).allSatisfy { $0 == Self.paused })
    }
}
