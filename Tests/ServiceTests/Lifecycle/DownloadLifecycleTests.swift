import Testing
@testable import DownloaderEngine

/// The download lifecycle as a table: in state …, on event …, the engine is asked to …, and the
/// download is then in state …. States are named in `LifecycleState` (each reached by real events);
/// the notation is `LifecycleNotation`'s. A state reads `phase #attempt stage [abandoned] [hold]
/// [moving]`. Read it as the specification of a download's life.
@Suite struct DownloadLifecycleTests {
    typealias S = LifecycleState

    struct Row: CustomTestStringConvertible, Sendable {
        var given: LifecycleState
        var event: LifecycleEvent
        var actions: String
        var then: String
        var testDescription: String { "\(given.rawValue) + \(event)" }
    }

    static func leave(_ partial: PartialFacts = S.resumable) -> LifecycleEvent {
        .callerLeft(remaining: 0, partial: partial)
    }

    static func settled(_ serial: UInt64, _ verdict: AttemptVerdict, _ partial: PartialFacts = S.resumable) -> LifecycleEvent {
        .attemptSettled(serial: serial, verdict, partial: partial)
    }

    static let diskFull = AttemptVerdict.rejected(DownloadFailure(code: .diskFull, message: "no space"), discardPartial: false)
    static let completedActions = "keep-settled record-completion release-slot emit:completed purge-cache journal"

    static let rows: [Row] = [
        // Waiting for a slot.
        Row(given: .queued, event: .callerJoined, actions: "", then: "queued"),
        Row(given: .queued, event: .callerLeft(remaining: 1, partial: .empty), actions: "journal", then: "queued"),
        Row(given: .queued, event: leave(), actions: "leave-queue emit:paused bound-empty-paused journal", then: "paused"),
        Row(given: .queued, event: .slotGranted, actions: "start#1", then: "running(attempt) #1 starting"),
        Row(given: .queued, event: .shutdown, actions: "", then: "queued"),
        Row(given: .queued, event: .retryDue(token: 1), actions: "", then: "queued"),
        Row(given: .queued, event: .headReceived(serial: 1, accepts: true), actions: "abort-unwanted", then: "queued"),
        Row(given: .queued, event: .transferEnded(serial: 1), actions: "close-stale", then: "queued"),
        Row(given: .queued, event: .fileVanished, actions: "", then: "queued"),

        // An attempt waiting for its head.
        Row(given: .starting, event: .callerJoined, actions: "", then: "running(attempt) #1 starting"),
        Row(given: .starting, event: leave(.empty), actions: "cancel#1 release-slot bound-empty-paused journal",
            then: "paused #1 starting abandoned"),
        Row(given: .starting, event: .headReceived(serial: 1, accepts: true), actions: "accept-body emit:resumed journal",
            then: "running(attempt) #1 transferring"),
        Row(given: .starting, event: .headReceived(serial: 1, accepts: false), actions: "refuse-body",
            then: "running(attempt) #1 starting"),
        Row(given: .starting, event: .headReceived(serial: 2, accepts: true), actions: "abort-unwanted",
            then: "running(attempt) #1 starting"),
        Row(given: .starting, event: .checkpointSynced(serial: 1), actions: "", then: "running(attempt) #1 starting"),
        Row(given: .starting, event: .transferEnded(serial: 1), actions: "settle#1", then: "running(attempt) #1 settling"),
        Row(given: .starting, event: .shutdown, actions: "cancel#1", then: "running(stopped) #1 starting abandoned"),
        Row(given: .starting, event: .slotGranted, actions: "release-slot", then: "running(attempt) #1 starting"),

        // A body being written.
        Row(given: .transferring, event: .checkpointSynced(serial: 1), actions: "keep-durable journal",
            then: "running(attempt) #1 transferring"),
        Row(given: .transferring, event: .checkpointSynced(serial: 2), actions: "", then: "running(attempt) #1 transferring"),
        Row(given: .transferring, event: leave(), actions: "cancel#1 release-slot bound-empty-paused journal",
            then: "paused #1 transferring abandoned"),
        Row(given: .transferring, event: .callerLeft(remaining: 1, partial: S.resumable), actions: "journal",
            then: "running(attempt) #1 transferring"),
        Row(given: .transferring, event: .transferEnded(serial: 1), actions: "settle#1", then: "running(attempt) #1 settling"),
        Row(given: .transferring, event: .shutdown, actions: "cancel#1", then: "running(stopped) #1 transferring abandoned"),
        Row(given: .transferring, event: .retryDue(token: 1), actions: "", then: "running(attempt) #1 transferring"),

        // The transfer ended: verdicts.
        Row(given: .settling, event: .publishing(serial: 1), actions: "record-publishing journal",
            then: "running(attempt) #1 publishing"),
        Row(given: .settling, event: settled(1, S.cut), actions: "keep-settled retry#2/1 journal", then: "running(backingOff#2)"),
        Row(given: .settling, event: settled(1, S.unavailable), actions: "keep-settled retry#2/1(7) journal",
            then: "running(backingOff#2)"),
        Row(given: .settling, event: settled(1, S.restart), actions: "keep-settled forget-validator discard-partial retry#2/1 journal",
            then: "running(backingOff#2)"),
        Row(given: .settling, event: settled(1, S.notFound),
            actions: "keep-settled discard-partial record-failure(http_error) release-slot emit:failed forget-old-failures journal",
            then: "failed"),
        Row(given: .settling, event: settled(1, S.checksumMismatch),
            actions: "keep-settled discard-partial record-failure(checksum_mismatch) release-slot emit:failed forget-old-failures journal",
            then: "failed"),
        Row(given: .settling, event: settled(2, S.cut), actions: "", then: "running(attempt) #1 settling"),
        Row(given: .settling, event: .checkpointSynced(serial: 1), actions: "", then: "running(attempt) #1 settling"),
        Row(given: .settling, event: leave(), actions: "release-slot bound-empty-paused journal", then: "paused #1 settling abandoned"),
        Row(given: .settling, event: .shutdown, actions: "", then: "running(stopped) #1 settling abandoned"),
        Row(given: .publishing, event: settled(1, .published, .empty), actions: completedActions, then: "completed"),
        Row(given: .publishing, event: settled(1, diskFull, .empty),
            actions: "keep-settled record-failure(disk_full) release-slot emit:failed forget-old-failures journal", then: "failed"),
        Row(given: .publishing, event: leave(.empty), actions: "release-slot bound-empty-paused journal",
            then: "paused #1 publishing abandoned"),
        Row(given: .lastAttemptSettling, event: settled(5, S.unavailable),
            actions: "keep-settled record-failure(retries_exhausted) release-slot emit:failed forget-old-failures journal",
            then: "failed"),

        // Between attempts.
        Row(given: .backingOff, event: .retryDue(token: 2), actions: "start#3", then: "running(attempt) #3 starting"),
        Row(given: .backingOff, event: .retryDue(token: 1), actions: "", then: "running(backingOff#2)"),
        Row(given: .backingOff, event: leave(), actions: "release-slot emit:paused bound-empty-paused journal", then: "paused"),
        Row(given: .backingOff, event: leave(S.unresumable),
            actions: "release-slot discard-partial emit:paused bound-empty-paused journal", then: "paused"),
        Row(given: .backingOff, event: .shutdown, actions: "", then: "running(stopped)"),
        Row(given: .backingOff, event: .callerJoined, actions: "", then: "running(backingOff#2)"),

        // Paused, with nothing running.
        Row(given: .paused, event: .callerJoined, actions: "clear-failure emit:queued request-slot", then: "queued"),
        Row(given: .paused, event: .retryDue(token: 2), actions: "", then: "paused"),
        Row(given: .paused, event: .slotGranted, actions: "release-slot", then: "paused"),
        Row(given: .paused, event: .shutdown, actions: "", then: "paused"),

        // Paused while the abandoned attempt drains: `paused` is told when it has settled.
        Row(given: .pausedStarting, event: .headReceived(serial: 1, accepts: true), actions: "abort-unwanted",
            then: "paused #1 starting abandoned"),
        Row(given: .pausedStarting, event: .headReceived(serial: 1, accepts: false), actions: "abort-unwanted",
            then: "paused #1 starting abandoned"),
        Row(given: .pausedStarting, event: .transferEnded(serial: 1), actions: "settle#1", then: "paused #1 settling abandoned"),
        Row(given: .pausedDraining, event: .checkpointSynced(serial: 1), actions: "keep-durable journal",
            then: "paused #1 transferring abandoned"),
        Row(given: .pausedDraining, event: .transferEnded(serial: 1), actions: "settle#1", then: "paused #1 settling abandoned"),
        Row(given: .pausedDraining, event: .callerJoined, actions: "clear-failure emit:queued request-slot",
            then: "queued #1 transferring abandoned"),
        Row(given: .pausedDraining, event: .shutdown, actions: "", then: "paused #1 transferring abandoned"),
        Row(given: .pausedSettling, event: settled(1, S.cut), actions: "keep-settled emit:paused journal", then: "paused"),
        Row(given: .pausedSettling, event: settled(1, S.cut, S.unresumable), actions: "keep-settled discard-partial emit:paused journal",
            then: "paused"),
        Row(given: .pausedSettling, event: settled(1, S.restart),
            actions: "keep-settled forget-validator discard-partial emit:paused journal", then: "paused"),
        // An abandoned attempt's HTTP failure is not the download's: the next caller tries again.
        Row(given: .pausedSettling, event: settled(1, S.notFound), actions: "keep-settled emit:paused journal", then: "paused"),
        // A whole body that fails verification fails the download, paused or not.
        Row(given: .pausedSettling, event: settled(1, S.checksumMismatch),
            actions: "keep-settled discard-partial record-failure(checksum_mismatch) emit:failed forget-old-failures journal",
            then: "failed"),
        Row(given: .pausedSettling, event: .publishing(serial: 1), actions: "record-publishing journal",
            then: "paused #1 publishing abandoned"),
        Row(given: .pausedSettling, event: .callerJoined, actions: "clear-failure emit:queued request-slot", then: "queued #1 settling abandoned"),
        // A pause during publishing: the verified file is published, the download completes.
        Row(given: .pausedPublishing, event: settled(1, .published, .empty),
            actions: "keep-settled record-completion emit:completed purge-cache journal", then: "completed"),
        Row(given: .pausedPublishing, event: .callerJoined, actions: "clear-failure emit:queued request-slot",
            then: "queued #1 publishing abandoned"),

        // A caller joining while the last one's cancel drains.
        Row(given: .queuedDraining, event: .slotGranted, actions: "", then: "running(awaitingDrain) #1 transferring abandoned"),
        Row(given: .queuedDraining, event: leave(), actions: "leave-queue bound-empty-paused journal",
            then: "paused #1 transferring abandoned"),
        Row(given: .queuedDraining, event: .transferEnded(serial: 1), actions: "settle#1", then: "queued #1 settling abandoned"),
        Row(given: .queuedSettling, event: settled(1, S.cut), actions: "keep-settled journal", then: "queued"),
        Row(given: .queuedSettling, event: settled(1, .published, .empty),
            actions: "keep-settled record-completion leave-queue emit:completed purge-cache journal", then: "completed"),
        Row(given: .awaitingDrain, event: .transferEnded(serial: 1), actions: "settle#1",
            then: "running(awaitingDrain) #1 settling abandoned"),
        Row(given: .awaitingDrain, event: leave(), actions: "release-slot bound-empty-paused journal",
            then: "paused #1 transferring abandoned"),
        Row(given: .awaitingDrain, event: .shutdown, actions: "", then: "running(stopped) #1 transferring abandoned"),
        Row(given: .awaitingDrainSettling, event: settled(1, S.cut), actions: "keep-settled start#2 journal",
            then: "running(attempt) #2 starting"),
        Row(given: .awaitingDrainSettling, event: settled(1, S.restart),
            actions: "keep-settled forget-validator discard-partial start#2 journal", then: "running(attempt) #2 starting"),
        Row(given: .awaitingDrainSettling, event: settled(1, .published, .empty), actions: completedActions, then: "completed"),

        // Shutdown: everything stops where it stands and is stored; nothing starts.
        Row(given: .stopped, event: .transferEnded(serial: 1), actions: "settle#1", then: "running(stopped) #1 settling abandoned"),
        Row(given: .stopped, event: .headReceived(serial: 1, accepts: true), actions: "abort-unwanted",
            then: "running(stopped) #1 transferring abandoned"),
        Row(given: .stopped, event: leave(), actions: "release-slot bound-empty-paused journal", then: "paused #1 transferring abandoned"),
        Row(given: .stoppedSettling, event: settled(1, S.cut), actions: "keep-settled journal", then: "running(stopped)"),
        Row(given: .stoppedSettling, event: settled(1, S.restart), actions: "keep-settled forget-validator discard-partial journal",
            then: "running(stopped)"),
        Row(given: .stoppedSettling, event: settled(1, .published, .empty), actions: completedActions, then: "completed"),
        // A retry due after shutdown began.
        Row(given: .stoppedBackingOff, event: .retryDue(token: 2), actions: "", then: "running(stopped)"),

        // Ended.
        Row(given: .completed, event: .callerJoined, actions: "", then: "completed"),
        Row(given: .completed, event: .callerLeft(remaining: 0, partial: .empty), actions: "journal", then: "completed"),
        Row(given: .completed, event: .fileVanished, actions: "reset-result emit:failed", then: "failed"),
        Row(given: .completed, event: .placementWanted(inPlace: true), actions: "", then: "completed"),
        Row(given: .completed, event: .placementWanted(inPlace: false), actions: "move-file", then: "completed moving"),
        Row(given: .completed, event: .shutdown, actions: "", then: "completed"),
        Row(given: .moving, event: .placementWanted(inPlace: false), actions: "", then: "completed moving"),
        Row(given: .moving, event: .moveEnded, actions: "", then: "completed"),
        Row(given: .moving, event: .fileVanished, actions: "", then: "completed moving"),
        Row(given: .failed, event: .callerJoined, actions: "clear-failure emit:queued request-slot", then: "queued"),
        Row(given: .failed, event: .callerLeft(remaining: 0, partial: .empty), actions: "journal", then: "failed"),
        Row(given: .failed, event: .retryDue(token: 2), actions: "", then: "failed"),

        // Recovered from the journal.
        Row(given: .recoveredQueued, event: .slotGranted, actions: "start#1", then: "running(attempt) #1 starting"),
        Row(given: .recoveredPaused, event: .callerJoined, actions: "clear-failure emit:queued request-slot", then: "queued"),
        // Running when the engine stopped, with no stored caller (readers are not stored): paused.
        Row(given: .recoveredRunning, event: .callerJoined, actions: "clear-failure emit:queued request-slot", then: "queued"),
        // Recovery of a download that was moving: the move starts again.
        Row(given: .recoveredCompleted, event: .placementWanted(inPlace: false), actions: "move-file", then: "completed moving"),
    ]

    @Test(arguments: rows)
    func transition(_ row: Row) {
        var (lifecycle, shuttingDown) = row.given.reach()
        let actions = lifecycle.handle(row.event, .init(maxAttempts: S.maxAttempts, shuttingDown: shuttingDown))
        #expect(LifecycleNotation.actions(actions) == row.actions)
        #expect(LifecycleNotation.state(lifecycle) == row.then)
    }

    /// Where each named state stands (so the table's "given" column means what its name says).
    @Test func namedStates() {
        let expected: [LifecycleState: String] = [
            .queued: "queued", .starting: "running(attempt) #1 starting", .transferring: "running(attempt) #1 transferring",
            .settling: "running(attempt) #1 settling", .publishing: "running(attempt) #1 publishing",
            .backingOff: "running(backingOff#2)", .lastAttemptSettling: "running(attempt) #5 settling", .paused: "paused",
            .pausedStarting: "paused #1 starting abandoned", .pausedDraining: "paused #1 transferring abandoned",
            .pausedSettling: "paused #1 settling abandoned", .pausedPublishing: "paused #1 publishing abandoned",
            .queuedDraining: "queued #1 transferring abandoned", .queuedSettling: "queued #1 settling abandoned",
            .awaitingDrain: "running(awaitingDrain) #1 transferring abandoned",
            .awaitingDrainSettling: "running(awaitingDrain) #1 settling abandoned",
            .stopped: "running(stopped) #1 transferring abandoned", .stoppedSettling: "running(stopped) #1 settling abandoned",
            .stoppedBackingOff: "running(stopped)", .completed: "completed", .moving: "completed moving", .failed: "failed",
            .recoveredRunning: "paused", .recoveredQueued: "queued", .recoveredPaused: "paused",
            .recoveredCompleted: "completed",
        ]
        for state in LifecycleState.allCases {
            #expect(LifecycleNotation.state(state.reach().0) == expected[state], "\(state.rawValue)")
        }
        #expect(LifecycleState.lastAttemptSettling.reach().0.attemptsMade == S.maxAttempts)
    }

    @Test func startAndRecovery() {
        let (new, actions) = DownloadLifecycle.start()
        #expect(LifecycleNotation.state(new) == "queued" && LifecycleNotation.actions(actions) == "request-slot")
        let cases: [(DownloadState, Int, String, String)] = [
            (.downloading, 0, "", "paused"),
            (.downloading, 1, "request-slot", "queued"),
            (.queued, 0, "", "paused"),
            (.paused, 0, "", "paused"),
            (.completed, 0, "", "completed"),
            (.failed, 0, "", "failed"),
        ]
        for (journaled, callers, actions, state) in cases {
            var l = DownloadLifecycle(restoring: journaled)
            let done = l.handle(.recovered(callers: callers), .init(maxAttempts: 3))
            #expect(LifecycleNotation.actions(done) == actions, "\(journaled) \(callers)")
            #expect(LifecycleNotation.state(l) == state, "\(journaled) \(callers)")
        }
    }

    /// An attempt that kept 1 MiB more counts as the first: the last one allowed is retried, with
    /// the first attempt's backoff; one that kept less (or must restart) still exhausts them.
    @Test func anAttemptThatProgressedStartsTheCountAgain() {
        var progressed = AttemptEnd(reason: "connection reset")
        progressed.progressed = true
        var (l, _) = LifecycleState.lastAttemptSettling.reach()
        let actions = l.handle(Self.settled(5, .ended(progressed)), .init(maxAttempts: S.maxAttempts))
        #expect(actions.contains { if case .scheduleRetry(_, 1, nil) = $0 { true } else { false } }, "\(actions)")
        #expect(l.attemptsMade == 1)
        var restarting = progressed
        restarting.restart = true
        var (r, _) = LifecycleState.lastAttemptSettling.reach()
        let exhausted = r.handle(Self.settled(5, .ended(restarting)), .init(maxAttempts: S.maxAttempts))
        #expect(exhausted.contains { if case .recordFailure(let f) = $0 { f.code == .retriesExhausted } else { false } })
    }

    /// An attempt that could not open its file (out of descriptors) never asked the origin: it is
    /// not counted against `maxAttempts` and waits `shortageDelay`, `maxShortages` times in a row.
    @Test func anAttemptThatCouldNotOpenItsFileIsNotCounted() {
        var shortage = AttemptEnd(retryAfter: AttemptEnd.shortageDelay, reason: "open: Too many open files (errno 24)")
        shortage.shortage = true
        let context = DownloadLifecycle.Context(maxAttempts: S.maxAttempts)
        var (l, _) = LifecycleState.lastAttemptSettling.reach()
        var serial: UInt64 = 5
        for round in 0..<AttemptEnd.maxShortages {
            let actions = l.handle(Self.settled(serial, .ended(shortage)), context)
            let token = actions.compactMap { if case .scheduleRetry(let t, _, AttemptEnd.shortageDelay) = $0 { t } else { nil } }.first
            guard let token else { Issue.record("round \(round): \(LifecycleNotation.actions(actions))"); return }
            #expect(l.attemptsMade == S.maxAttempts - 1)
            let started = l.handle(.retryDue(token: token), context)
            guard let next = started.compactMap({ if case .startAttempt(let s) = $0 { s } else { nil } }).first else {
                Issue.record("round \(round): \(LifecycleNotation.actions(started))")
                return
            }
            serial = next
            _ = l.handle(.transferEnded(serial: serial), context)
        }
        let exhausted = l.handle(Self.settled(serial, .ended(shortage)), context)
        #expect(exhausted.contains { if case .recordFailure(let f) = $0 { f.code == .retriesExhausted } else { false } })
    }

    /// An attempt that ran out of disk space waits for space (`SpaceWait`): not counted against
    /// `maxAttempts`, the kept bytes stay, `waitsForSpace` until an attempt writes again;
    /// `maxSpaceWaits` looks in a row, then `disk_full`. An attempt that kept 1 MiB more starts
    /// the count again; without a wait allowed the download fails at once.
    @Test func anAttemptThatRanOutOfSpaceWaitsForSpace() {
        var full = AttemptEnd(retryAfter: SpaceWait.retryAfter, reason: "no space left on the device")
        full.noSpace = true
        let context = DownloadLifecycle.Context(maxAttempts: S.maxAttempts, maxSpaceWaits: 3)
        var (l, _) = LifecycleState.lastAttemptSettling.reach()
        var serial: UInt64 = 5
        func waitOnce(_ end: AttemptEnd, _ round: Int, begins: Bool = false) -> Bool {
            let counted = l.attemptsMade
            let actions = l.handle(Self.settled(serial, .ended(end)), context)
            #expect(l.spaceWaitBegan == begins, "round \(round): a wait begins after an attempt that did not end on a full disk")
            #expect(!actions.contains(.discardPartial), "round \(round)")
            let token = actions.compactMap { if case .scheduleRetry(let t, _, SpaceWait.retryAfter) = $0 { t } else { nil } }.first
            guard let token else { Issue.record("round \(round): \(LifecycleNotation.actions(actions))"); return false }
            // Not counted: as before this attempt (or, when it kept 1 MiB more, as before the first).
            #expect(l.waitsForSpace && l.attemptsMade == (end.progressed ? 0 : counted - 1), "round \(round)")
            let started = l.handle(.retryDue(token: token), context)
            guard let next = started.compactMap({ if case .startAttempt(let s) = $0 { s } else { nil } }).first else {
                Issue.record("round \(round): \(LifecycleNotation.actions(started))")
                return false
            }
            serial = next
            #expect(l.waitsForSpace, "the new attempt looks for space first")
            return true
        }
        for round in 0..<3 {
            guard waitOnce(full, round, begins: round != 1) else { return }
            if round == 1 {
                // This attempt found room and writes: no longer waiting (also while it settles),
                // still counted; its end on a full disk begins a new wait.
                _ = l.handle(.headReceived(serial: serial, accepts: true), context)
                #expect(!l.waitsForSpace && l.spaceWaitsInARow == 2)
                _ = l.handle(.transferEnded(serial: serial), context)
                #expect(!l.waitsForSpace)
                continue
            }
            _ = l.handle(.transferEnded(serial: serial), context)
        }
        let exhausted = l.handle(Self.settled(serial, .ended(full)), context)
        #expect(LifecycleNotation.actions(exhausted).hasPrefix("keep-settled record-failure(disk_full)"), "\(exhausted)")
        #expect(!exhausted.contains(.discardPartial) && !l.waitsForSpace)

        // Progress starts the count again; another end stops the wait.
        (l, _) = LifecycleState.lastAttemptSettling.reach()
        serial = 5
        var progressedFull = full
        progressedFull.progressed = true
        for round in 0..<5 {
            guard waitOnce(round.isMultiple(of: 2) ? progressedFull : full, round, begins: round == 0) else { return }
            _ = l.handle(.transferEnded(serial: serial), context)
        }
        let reset = l.handle(Self.settled(serial, .ended(AttemptEnd(reason: "connection reset"))), context)
        #expect(reset.contains { if case .scheduleRetry(_, _, nil) = $0 { true } else { false } }, "\(reset)")
        #expect(!l.waitsForSpace)

        // No wait allowed: disk_full at once, the bytes kept.
        (l, _) = LifecycleState.lastAttemptSettling.reach()
        let atOnce = l.handle(Self.settled(5, .ended(full)), .init(maxAttempts: S.maxAttempts))
        #expect(LifecycleNotation.actions(atOnce).hasPrefix("keep-settled record-failure(disk_full)"), "\(atOnce)")
    }

    @Test func retriesExhaustedSaysHowManyAndWhy() {
        var (l, _) = LifecycleState.lastAttemptSettling.reach()
        let actions = l.handle(Self.settled(5, S.unavailable), .init(maxAttempts: S.maxAttempts))
        let failure = actions.compactMap { if case .recordFailure(let f) = $0 { f } else { nil } }.first
        #expect(failure == DownloadFailure(code: .retriesExhausted, message: "gave up after 3 attempts: HTTP 503", httpStatus: 503))
    }

    /// Every event in every named state keeps the invariants (events that cannot happen included).
    @Test func invariantsHoldForEveryStateAndEvent() {
        let events: [LifecycleEvent] = [
            .callerJoined, Self.leave(), Self.leave(S.unresumable), .callerLeft(remaining: 2, partial: S.resumable), .slotGranted,
            .headReceived(serial: 1, accepts: true), .headReceived(serial: 1, accepts: false), .checkpointSynced(serial: 1),
            .transferEnded(serial: 1), .publishing(serial: 1), Self.settled(1, .published), Self.settled(1, S.cut),
            Self.settled(1, S.restart), Self.settled(1, S.notFound), Self.settled(1, S.checksumMismatch), .retryDue(token: 2),
            .shutdown, .recovered(callers: 0), .fileVanished, .placementWanted(inPlace: false), .moveEnded,
        ]
        for state in LifecycleState.allCases {
            for event in events {
                var (l, shuttingDown) = state.reach()
                _ = l.handle(event, .init(maxAttempts: S.maxAttempts, shuttingDown: shuttingDown))
                let where_ = "\(state.rawValue) + \(event) → \(LifecycleNotation.state(l))"
                let live = l.attempt.map { !$0.abandoned } ?? false
                #expect(live == (l.phase == .running(.attempt)), "a live attempt is exactly running(attempt): \(where_)")
                if case .running(.backingOff) = l.phase { #expect(l.attempt == nil, "\(where_)") }
                if l.phase == .completed || l.phase == .failed { #expect(l.attempt == nil, "\(where_)") }
                if l.moving { #expect(l.phase == .completed || l.phase == .failed, "\(where_)") }
            }
        }
    }
}
