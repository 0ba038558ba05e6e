@testable import DownloaderEngine

/// Named states of one download, each reached from `start()` (or from the journal) by real events,
/// so every state in the table is one the engine can be in.
enum LifecycleState: String, CaseIterable, Sendable {
    case queued, starting, transferring, settling, publishing, backingOff, lastAttemptSettling
    case paused, pausedStarting = "paused while starting", pausedDraining = "paused while transferring"
    case pausedSettling = "paused while settling", pausedPublishing = "paused while publishing"
    case queuedDraining = "queued while draining", queuedSettling = "queued while settling"
    case awaitingDrain, awaitingDrainSettling = "awaiting drain, settling"
    case stopped, stoppedSettling = "stopped, settling", stoppedBackingOff = "stopped while backing off"
    case completed, moving, failed
    case recoveredRunning = "recovered running, no caller", recoveredQueued = "recovered queued", recoveredPaused = "recovered paused"
    case recoveredCompleted = "recovered completed"

    static let maxAttempts = 3
    static let resumable = PartialFacts(keptBytes: 100, resumable: true)
    static let unresumable = PartialFacts(keptBytes: 100, resumable: false)
    /// An attempt cut short (connection reset): retry.
    static let cut = AttemptVerdict.ended(AttemptEnd(reason: "connection reset"))
    static let restart = AttemptVerdict.ended(AttemptEnd(restart: true))
    static let notFound = AttemptVerdict.ended(AttemptEnd(
        failure: DownloadFailure(code: .httpError, message: "the origin answered HTTP 404", httpStatus: 404),
        discardPartial: true, httpStatus: 404, reason: "HTTP 404"))
    static let unavailable = AttemptVerdict.ended(AttemptEnd(retryAfter: "7", httpStatus: 503, reason: "HTTP 503"))
    static let checksumMismatch = AttemptVerdict.rejected(
        DownloadFailure(code: .checksumMismatch, message: "sha256 differs"), discardPartial: true)

    /// The lifecycle in this state, and whether the engine is shutting down.
    func reach() -> (DownloadLifecycle, shuttingDown: Bool) {
        var shuttingDown = false
        var (l, _) = DownloadLifecycle.start()
        func on(_ events: LifecycleEvent...) {
            for e in events { _ = l.handle(e, .init(maxAttempts: Self.maxAttempts, shuttingDown: shuttingDown)) }
        }
        func restore(_ state: DownloadState, callers: Int) {
            l = DownloadLifecycle(restoring: state)
            on(.recovered(callers: callers))
        }
        let transferring: [LifecycleEvent] = [.slotGranted, .headReceived(serial: 1, accepts: true)]
        let leave = LifecycleEvent.callerLeft(remaining: 0, partial: Self.resumable)
        switch self {
        case .queued: break
        case .starting: on(.slotGranted)
        case .transferring: transferring.forEach { on($0) }
        case .settling: transferring.forEach { on($0) }; on(.transferEnded(serial: 1))
        case .publishing: LifecycleState.settling.replay(&l); on(.publishing(serial: 1))
        case .backingOff: LifecycleState.settling.replay(&l); on(.attemptSettled(serial: 1, Self.cut, partial: Self.resumable))
        case .lastAttemptSettling:
            LifecycleState.backingOff.replay(&l)
            on(.retryDue(token: 2), .headReceived(serial: 3, accepts: true), .transferEnded(serial: 3),
               .attemptSettled(serial: 3, Self.cut, partial: Self.resumable),
               .retryDue(token: 4), .headReceived(serial: 5, accepts: true), .transferEnded(serial: 5))
        case .paused: LifecycleState.backingOff.replay(&l); on(leave)
        case .pausedStarting: on(.slotGranted, leave)
        case .pausedDraining: transferring.forEach { on($0) }; on(leave)
        case .pausedSettling: LifecycleState.pausedDraining.replay(&l); on(.transferEnded(serial: 1))
        case .pausedPublishing: LifecycleState.pausedSettling.replay(&l); on(.publishing(serial: 1))
        case .queuedDraining: LifecycleState.pausedDraining.replay(&l); on(.callerJoined)
        case .queuedSettling: LifecycleState.queuedDraining.replay(&l); on(.transferEnded(serial: 1))
        case .awaitingDrain: LifecycleState.queuedDraining.replay(&l); on(.slotGranted)
        case .awaitingDrainSettling: LifecycleState.awaitingDrain.replay(&l); on(.transferEnded(serial: 1))
        case .stopped:
            transferring.forEach { on($0) }
            shuttingDown = true
            on(.shutdown)
        case .stoppedSettling:
            transferring.forEach { on($0) }
            shuttingDown = true
            on(.shutdown, .transferEnded(serial: 1))
        case .stoppedBackingOff:
            LifecycleState.backingOff.replay(&l)
            shuttingDown = true
            on(.shutdown)
        case .completed: LifecycleState.publishing.replay(&l); on(.attemptSettled(serial: 1, .published, partial: .empty))
        case .moving: LifecycleState.completed.replay(&l); on(.placementWanted(inPlace: false))
        case .failed: LifecycleState.settling.replay(&l); on(.attemptSettled(serial: 1, Self.notFound, partial: Self.resumable))
        case .recoveredRunning: restore(.downloading, callers: 0)
        case .recoveredQueued: restore(.queued, callers: 2)
        case .recoveredPaused: restore(.paused, callers: 0)
        case .recoveredCompleted: restore(.completed, callers: 0)
        }
        return (l, shuttingDown)
    }

    private func replay(_ l: inout DownloadLifecycle) {
        l = reach().0
    }
}
