import Testing
@testable import DownloaderEngine

/// The operator's events in the lifecycle, as a table (notation: `LifecycleNotation`; `held` marks
/// the operator's hold): pause holds a download paused whatever its callers do, resume lifts the
/// hold (running again only with callers left), removal stops everything.
@Suite struct OperatorLifecycleTests {
    typealias S = LifecycleState

    struct Row: CustomTestStringConvertible, Sendable {
        var given: LifecycleState
        /// Events applied after reaching `given` (e.g. the hold itself).
        var before: [LifecycleEvent] = []
        var event: LifecycleEvent
        var actions: String
        var then: String
        var testDescription: String { "\(given.rawValue) \(before) + \(event)" }
    }

    static let hold = LifecycleEvent.operatorPaused(partial: S.resumable)

    static let rows: [Row] = [
        // Pausing: as the last caller leaving, and held.
        Row(given: .queued, event: hold, actions: "leave-queue emit:paused journal", then: "paused held"),
        Row(given: .starting, event: hold, actions: "cancel#1 release-slot journal", then: "paused #1 starting abandoned held"),
        Row(given: .transferring, event: hold, actions: "cancel#1 release-slot journal",
            then: "paused #1 transferring abandoned held"),
        Row(given: .backingOff, event: hold, actions: "release-slot emit:paused journal", then: "paused held"),
        Row(given: .backingOff, event: .operatorPaused(partial: S.unresumable),
            actions: "release-slot discard-partial emit:paused journal", then: "paused held"),
        // Already paused by its callers: held, and told so (by the operator) unless an attempt still settles.
        Row(given: .paused, event: hold, actions: "emit:paused journal", then: "paused held"),
        Row(given: .pausedDraining, event: hold, actions: "journal", then: "paused #1 transferring abandoned held"),
        // Idempotent.
        Row(given: .paused, before: [hold], event: hold, actions: "", then: "paused held"),
        // Not for ended downloads (the engine answers 409 before asking).
        Row(given: .completed, event: hold, actions: "", then: "completed"),
        Row(given: .failed, event: hold, actions: "", then: "failed"),

        // Held: callers joining and leaving change nothing.
        Row(given: .paused, before: [hold], event: .callerJoined, actions: "", then: "paused held"),
        Row(given: .transferring, before: [hold], event: .callerJoined, actions: "", then: "paused #1 transferring abandoned held"),
        Row(given: .paused, before: [hold], event: .callerLeft(remaining: 0, partial: S.resumable), actions: "journal",
            then: "paused held"),
        // The abandoned attempt settles: `paused` is told then (by the operator).
        Row(given: .transferring, before: [hold, .transferEnded(serial: 1)], event: .attemptSettled(serial: 1, S.cut, partial: S.resumable),
            actions: "keep-settled emit:paused journal", then: "paused held"),
        // A verified body published meanwhile completes the download: the hold ends with it.
        Row(given: .publishing, before: [hold], event: .attemptSettled(serial: 1, .published, partial: .empty),
            actions: "keep-settled record-completion emit:completed purge-cache journal", then: "completed"),

        // Resuming: with callers it queues again, without it stays paused; not held: nothing.
        Row(given: .paused, before: [hold], event: .operatorResumed(callers: 1), actions: "emit:queued request-slot journal", then: "queued"),
        Row(given: .paused, before: [hold], event: .operatorResumed(callers: 0), actions: "emit:paused journal", then: "paused"),
        Row(given: .transferring, before: [hold], event: .operatorResumed(callers: 2), actions: "emit:queued request-slot journal",
            then: "queued #1 transferring abandoned"),
        Row(given: .paused, event: .operatorResumed(callers: 1), actions: "", then: "paused"),
        Row(given: .transferring, event: .operatorResumed(callers: 1), actions: "", then: "running(attempt) #1 transferring"),

        // Removal: the slot or queue place goes, a live attempt is cancelled.
        Row(given: .queued, event: .removed, actions: "leave-queue", then: "paused"),
        Row(given: .transferring, event: .removed, actions: "cancel#1 release-slot", then: "paused #1 transferring abandoned"),
        Row(given: .backingOff, event: .removed, actions: "release-slot", then: "paused"),
        Row(given: .paused, before: [hold], event: .removed, actions: "", then: "paused"),
        Row(given: .completed, event: .removed, actions: "", then: "completed"),
    ]

    @Test(arguments: rows)
    func transition(_ row: Row) {
        var (lifecycle, shuttingDown) = row.given.reach()
        let context = DownloadLifecycle.Context(maxAttempts: S.maxAttempts, shuttingDown: shuttingDown)
        for event in row.before { _ = lifecycle.handle(event, context) }
        let actions = lifecycle.handle(row.event, context)
        #expect(LifecycleNotation.actions(actions) == row.actions)
        #expect(LifecycleNotation.state(lifecycle) == row.then)
    }

    /// The hold is stored with the state: a held paused download is restored held (and stays
    /// paused whatever callers were stored); a hold never outlives the paused state.
    @Test func theHoldIsRestored() {
        var held = DownloadLifecycle(restoring: .paused, held: true)
        #expect(LifecycleNotation.actions(held.handle(.recovered(callers: 3), .init(maxAttempts: 3))) == "")
        #expect(LifecycleNotation.state(held) == "paused held")
        #expect(LifecycleNotation.actions(held.handle(.callerJoined, .init(maxAttempts: 3))) == "")
        #expect(!DownloadLifecycle(restoring: .completed, held: true).held)
        #expect(!DownloadLifecycle(restoring: .downloading, held: true).held)
    }

    /// The operator's events keep the lifecycle's invariants in every named state.
    @Test func invariantsHoldForOperatorEvents() {
        let events: [LifecycleEvent] = [Self.hold, .operatorPaused(partial: S.unresumable), .operatorResumed(callers: 0),
                                        .operatorResumed(callers: 1), .removed]
        for state in LifecycleState.allCases {
            for first in events {
                for second in events + [.callerJoined, .slotGranted] {
                    var (l, shuttingDown) = state.reach()
                    let context = DownloadLifecycle.Context(maxAttempts: S.maxAttempts, shuttingDown: shuttingDown)
                    _ = l.handle(first, context)
                    _ = l.handle(second, context)
                    let where_ = "\(state.rawValue) + \(first) + \(second) → \(LifecycleNotation.state(l))"
                    let live = l.attempt.map { !$0.abandoned } ?? false
                    #expect(live == (l.phase == .running(.attempt)), "a live attempt is exactly running(attempt): \(where_)")
                    if l.held { #expect(l.phase == .paused, "only a paused download is held: \(where_)") }
                }
            }
        }
    }
}
