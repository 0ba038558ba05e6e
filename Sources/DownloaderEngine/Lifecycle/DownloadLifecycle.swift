/// The life of one download as one value: its phase, its current attempt, and what each event makes
/// it do. Pure: `handle` takes an event and returns the actions for the engine, which locks,
/// decides here, unlocks and acts. `DownloadLifecycleTests` holds every reachable state × event.
///
///     start ──▶ queued ──slotGranted──▶ running ──published──▶ completed ──fileVanished──▶ failed
///                 ▲  │                  │     ▲ │                                         │
///                 │  └───last caller────┼─▶ paused ◀─last caller┘                         │
///                 └────────callerJoined─┴───────┘   (running: attempt ⇄ backingOff,      │
///                 └──────────────────────────callerJoined──────── awaitingDrain, stopped)┘
///
/// An attempt outlives the phase that started it: when the last caller leaves, the download is
/// `paused` at once and its attempt is *abandoned* (cancelled); the attempt still settles (its
/// partial synced and kept, or its verified file published, which completes the download), and the
/// `paused` event goes out only then. A caller joining meanwhile queues the download again; a new
/// attempt starts once the abandoned one has ended (`running(.awaitingDrain)`).
///
/// The operator's hold (`operatorPaused`) pauses the download whatever its callers want: callers
/// joining leave it `paused` until `operatorResumed` lifts the hold (stored, so it survives a
/// restart). `removed` stops everything: the engine forgets the download right after.
struct DownloadLifecycle: Equatable, Sendable {
    enum Phase: Equatable, Sendable {
        /// Waiting for one of the engine's transfer slots (`TransferSlots`).
        case queued
        /// Holds a transfer slot.
        case running(Run)
        /// No interest left; the partial is kept for a resume.
        case paused
        /// The file is verified and stored.
        case completed
        /// Ended with an error; a caller joining starts it afresh.
        case failed
    }

    /// What a download holding a slot is doing.
    enum Run: Equatable, Sendable {
        /// `attempt` is the current attempt.
        case attempt
        /// Between attempts: the retry timer `token` starts the next.
        case backingOff(token: UInt64)
        /// The next attempt starts when the abandoned one has ended.
        case awaitingDrain
        /// Stopped by the engine's shutdown; stored as downloading, so it carries on after a restart.
        case stopped
    }

    /// An attempt the download is waiting on.
    struct Attempt: Equatable, Sendable {
        enum Stage: Equatable, Sendable {
            /// Its partial is prepared and its transfer started; no head yet.
            case starting
            /// Its head was accepted and the body is being written.
            case transferring
            /// The transfer ended; the result is being verified or the partial synced.
            case settling
            /// The verified file is being renamed into its area (stored as an intent).
            case publishing
        }

        var serial: UInt64
        var stage: Stage = .starting
        /// Nobody waits for it any more (the last caller left, or shutdown): it settles, it never retries.
        var abandoned = false
    }

    /// What a decision depends on beyond the download itself.
    struct Context: Equatable, Sendable {
        /// Attempts allowed in a row before `retries_exhausted` (`RetryPolicy`).
        var maxAttempts: Int
        var shuttingDown = false
        /// Checks for disk space in a row before a full disk fails the download (`SpaceWait`); 0: at once.
        var maxSpaceWaits = 0
    }

    private(set) var phase: Phase
    private(set) var attempt: Attempt?
    /// Attempts in the current run (reset when the download pauses, completes, fails or is asked again).
    private(set) var attemptsMade = 0
    /// Attempts in a row that could not open their file (`AttemptEnd.shortage`), not counted in `attemptsMade`.
    private(set) var shortagesInARow = 0
    /// Attempts in a row that ended on a full disk (`AttemptEnd.noSpace`) since the download last
    /// kept `AttemptEnd.progressBytes`: it waits for space, not counted in `attemptsMade`.
    private(set) var spaceWaitsInARow = 0
    /// The last attempt ended on a full disk and no attempt has written since: the next one waits for space.
    private var lastEndedForSpace = false
    /// The last settled attempt began a wait for space (the attempt before it had not ended on a full disk).
    private(set) var spaceWaitBegan = false
    /// The completed file is being moved into another area.
    private(set) var moving = false
    /// The operator paused the download: callers joining do not resume it (only `operatorResumed` does).
    private(set) var held = false
    /// Attempt serials and retry tokens, never reused within the download.
    private var serials: UInt64 = 0

    /// The public state: a running download is `downloading`, a stopped one too (so it is stored
    /// as such and carries on after the restart).
    var state: DownloadState {
        switch phase {
        case .queued: .queued
        case .running: .downloading
        case .paused: .paused
        case .completed: .completed
        case .failed: .failed
        }
    }

    /// A body is being written by the current attempt.
    var isTransferring: Bool { phase == .running(.attempt) && attempt?.stage == .transferring }

    /// Its last attempt ran out of disk space and no attempt writes yet: it waits for space.
    var waitsForSpace: Bool {
        guard lastEndedForSpace, case .running = phase else { return false }
        return !isTransferring
    }

    /// A download the first caller just asked for: queued for a slot.
    static func start() -> (DownloadLifecycle, [LifecycleAction]) {
        (DownloadLifecycle(restoring: .queued), [.requestSlot])
    }

    /// The stored state of a download loaded at start-up (`recovered` decides what follows).
    /// A download stored as running carries on: it is queued again.
    init(restoring state: DownloadState, held: Bool = false) {
        self.held = held && state == .paused
        switch state {
        case .queued, .downloading: phase = .queued
        case .paused: phase = .paused
        case .completed: phase = .completed
        case .failed: phase = .failed
        }
    }

    mutating func handle(_ event: LifecycleEvent, _ context: Context) -> [LifecycleAction] {
        switch event {
        case .callerJoined: return callerJoined()
        case .callerLeft(let remaining, let partial): return callerLeft(remaining: remaining, partial)
        case .slotGranted:
            guard phase == .queued else { return [.releaseSlot] }
            return beginAttempt(context)
        case .headReceived(let serial, let accepts): return headReceived(serial, accepts: accepts, context)
        case .checkpointSynced(let serial):
            // A settling attempt may truncate its file: its late checkpoints say nothing.
            return current(serial)?.stage == .transferring ? [.keepDurableOffset, .journal] : []
        case .transferEnded(let serial):
            guard let a = current(serial), a.stage == .starting || a.stage == .transferring else { return [.closeStaleAttempt] }
            attempt?.stage = .settling
            return [.settle(serial: serial)]
        case .publishing(let serial):
            guard current(serial)?.stage == .settling else { return [] }
            attempt?.stage = .publishing
            return [.recordPublishing, .journal]
        case .attemptSettled(let serial, let verdict, let partial): return attemptSettled(serial, verdict, partial, context)
        case .retryDue(let token):
            guard phase == .running(.backingOff(token: token)) else { return [] }
            return beginAttempt(context)
        case .shutdown: return shutdown()
        case .recovered(let callers):
            // Running when the engine stopped: carries on for its stored callers; with none (its
            // readers are not stored), it is paused with its bytes kept.
            guard phase == .queued else { return [] }
            guard callers > 0 else {
                phase = .paused
                return []
            }
            return [.requestSlot]
        case .fileVanished:
            // While it moves, its old name goes before the new one is recorded: not vanished.
            guard phase == .completed, !moving else { return [] }
            phase = .failed
            return [.resetResult, .emit(.failed)]  // Told as any failure: streams, /events, callbacks, the story.
        case .placementWanted(let inPlace):
            guard phase == .completed, !moving, !inPlace else { return [] }
            moving = true
            return [.moveFile]
        case .moveEnded:
            moving = false
            return []
        case .operatorPaused(let partial): return operatorPaused(partial)
        case .operatorResumed(let callers): return operatorResumed(callers: callers)
        case .removed: return removed()
        }
    }

    private func current(_ serial: UInt64) -> Attempt? {
        attempt?.serial == serial ? attempt : nil
    }

    private mutating func callerJoined() -> [LifecycleAction] {
        if held { return [] }  // Only the operator lifts the hold.
        switch phase {
        case .paused, .failed:
            phase = .queued
            startsNewRun()
            return [.clearFailure, .emit(.queued), .requestSlot]
        case .queued, .running, .completed:
            return []
        }
    }

    private mutating func callerLeft(remaining: Int, _ partial: PartialFacts) -> [LifecycleAction] {
        guard remaining == 0 else { return [.journal] }
        switch phase {
        case .queued, .running: return pause(partial) + [.housekeeping(.boundEmptyPaused), .journal]
        case .paused, .completed, .failed: return [.journal]
        }
    }

    /// Stops work and keeps the partial. `paused` is told once the partial is settled: at once
    /// without an attempt, else when the abandoned attempt has ended.
    private mutating func pause(_ partial: PartialFacts) -> [LifecycleAction] {
        var actions = leaveSlotOrQueue()
        if var a = attempt, !a.abandoned {
            a.abandoned = true
            attempt = a
            if a.stage == .starting || a.stage == .transferring { actions.insert(.cancelTransfer(serial: a.serial), at: 0) }
        }
        phase = .paused
        startsNewRun()
        if attempt == nil { actions += settlePaused(partial) }
        return actions
    }

    /// Without a validator the kept bytes cannot be resumed safely: they go.
    private func settlePaused(_ partial: PartialFacts) -> [LifecycleAction] {
        (partial.keptBytes > 0 && !partial.resumable ? [.discardPartial] : []) + [.emit(.paused)]
    }

    private func leaveSlotOrQueue() -> [LifecycleAction] {
        switch phase {
        case .queued: [.leaveQueue]
        case .running: [.releaseSlot]
        case .paused, .completed, .failed: []
        }
    }

    /// The counts of attempts start again (the download paused, ended or was asked again).
    private mutating func startsNewRun() {
        attemptsMade = 0
        shortagesInARow = 0
        spaceWaitsInARow = 0
        lastEndedForSpace = false
        spaceWaitBegan = false
    }

    private mutating func beginAttempt(_ context: Context) -> [LifecycleAction] {
        guard !context.shuttingDown else {
            phase = .running(.stopped)
            return []
        }
        guard attempt == nil else {
            phase = .running(.awaitingDrain)
            return []
        }
        attemptsMade += 1
        serials += 1
        attempt = Attempt(serial: serials)
        phase = .running(.attempt)
        return [.startAttempt(serial: serials)]
    }

    private mutating func headReceived(_ serial: UInt64, accepts: Bool, _ context: Context) -> [LifecycleAction] {
        guard let a = current(serial), a.stage == .starting, !a.abandoned, !context.shuttingDown else {
            return [.abortUnwanted]
        }
        guard accepts else { return [.refuseBody] }
        attempt?.stage = .transferring
        lastEndedForSpace = false  // Writing again: the wait (if any) is over.
        return [.acceptBody, .emit(.resumed), .journal]
    }

    private mutating func attemptSettled(_ serial: UInt64, _ verdict: AttemptVerdict, _ partial: PartialFacts,
                                         _ context: Context) -> [LifecycleAction] {
        guard let a = current(serial), a.stage == .settling || a.stage == .publishing else { return [] }
        attempt = nil
        var actions: [LifecycleAction] = [.keepSettledPartial]
        let end: AttemptEnd
        switch verdict {
        case .published:
            return actions + complete()
        case .rejected(let failure, let discard):
            return actions + (discard ? [.discardPartial] : []) + fail(failure)
        case .ended(let ended):
            end = ended
        }
        var kept = partial
        if end.restart {
            actions += [.forgetValidator, .discardPartial]
            kept = .empty
        }
        if context.shuttingDown { return actions + [.journal] }
        if a.abandoned {
            switch phase {
            case .paused: actions += settlePaused(kept)
            case .running(.awaitingDrain): actions += beginAttempt(context)
            case .queued, .running, .completed, .failed: break
            }
            return actions + [.journal]
        }
        if let failure = end.failure {
            return actions + (end.discardPartial ? [.discardPartial] : []) + fail(failure)
        }
        if end.progressed && !end.restart {
            attemptsMade = 1  // As if this had been the first attempt.
            spaceWaitsInARow = 0
        }
        spaceWaitBegan = end.noSpace && !lastEndedForSpace
        lastEndedForSpace = end.noSpace
        if end.noSpace {
            attemptsMade -= 1  // Our disk, not the origin.
            spaceWaitsInARow += 1
            guard spaceWaitsInARow <= context.maxSpaceWaits else {
                let waited = context.maxSpaceWaits > 0 ? ", and not enough was freed while the download waited for it" : ""
                return actions + fail(DownloadFailure(code: .diskFull, message: "no space left on the device" + waited))
            }
        }
        if end.shortage {
            attemptsMade -= 1  // The origin was not asked.
            shortagesInARow += 1
            guard shortagesInARow <= AttemptEnd.maxShortages else {
                return actions + fail(DownloadFailure(code: .retriesExhausted,
                                                      message: "gave up after \(shortagesInARow) tries to open the file: \(end.reason)"))
            }
        } else {
            shortagesInARow = 0
        }
        guard attemptsMade < context.maxAttempts else {
            let exhausted = DownloadFailure(code: end.exhaustionCode, message: "gave up after \(attemptsMade) attempts: \(end.reason)",
                                            httpStatus: end.httpStatus)
            return actions + fail(exhausted)
        }
        serials += 1
        phase = .running(.backingOff(token: serials))
        return actions + [.scheduleRetry(token: serials, attemptsMade: attemptsMade, retryAfter: end.retryAfter), .journal]
    }

    private mutating func complete() -> [LifecycleAction] {
        let releasing = leaveSlotOrQueue()
        phase = .completed
        held = false
        startsNewRun()
        return [.recordCompletion] + releasing + [.emit(.completed), .housekeeping(.purgeCache), .journal]
    }

    private mutating func fail(_ failure: DownloadFailure) -> [LifecycleAction] {
        let releasing = leaveSlotOrQueue()
        phase = .failed
        held = false
        startsNewRun()
        return [.recordFailure(failure)] + releasing + [.emit(.failed), .housekeeping(.forgetOldFailures), .journal]
    }

    /// Everything stops where it stands: the running attempt is cancelled (its partial settles and
    /// is stored), no retry starts, nothing is told (the streams end with the engine).
    private mutating func shutdown() -> [LifecycleAction] {
        var actions: [LifecycleAction] = []
        if var a = attempt, !a.abandoned {
            a.abandoned = true
            attempt = a
            if a.stage == .starting || a.stage == .transferring { actions.append(.cancelTransfer(serial: a.serial)) }
        }
        if case .running = phase { phase = .running(.stopped) }
        return actions
    }

    /// The operator's pause: stops work as the last caller leaving does, and holds the download
    /// paused. A download already paused is held (told `paused` again, now by the operator, unless
    /// its abandoned attempt is still settling: then that tells it). Completed and failed downloads
    /// cannot be held (the engine refuses before asking).
    private mutating func operatorPaused(_ partial: PartialFacts) -> [LifecycleAction] {
        guard !held else { return [] }
        switch phase {
        case .completed, .failed:
            return []
        case .paused:
            held = true
            return (attempt == nil ? [.emit(.paused)] : []) + [.journal]
        case .queued, .running:
            held = true
            return pause(partial) + [.journal]
        }
    }

    /// The operator lifts the hold: with `callers` (callers and readers) left the download queues
    /// again, else it stays paused, now for its callers (told: watchers see `pausedBy` change).
    private mutating func operatorResumed(callers: Int) -> [LifecycleAction] {
        guard held else { return [] }
        held = false
        guard phase == .paused, callers > 0 else { return (phase == .paused && attempt == nil ? [.emit(.paused)] : []) + [.journal] }
        phase = .queued
        startsNewRun()
        return [.emit(.queued), .requestSlot, .journal]
    }

    /// Removal: the slot or the queue place goes, a live attempt is cancelled (it ends unheard: the
    /// engine forgets the download right after).
    private mutating func removed() -> [LifecycleAction] {
        var actions = leaveSlotOrQueue()
        if var a = attempt, !a.abandoned {
            a.abandoned = true
            attempt = a
            if a.stage == .starting || a.stage == .transferring { actions.insert(.cancelTransfer(serial: a.serial), at: 0) }
        }
        held = false
        if phase != .completed && phase != .failed { phase = .paused }
        return actions
    }
}
