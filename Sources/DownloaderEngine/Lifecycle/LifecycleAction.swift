/// What `DownloadLifecycle` asks the engine to do, in order. The engine applies data and slot
/// actions under its lock and carries out the rest (events, state writes, transfers, files) after it.
enum LifecycleAction: Equatable, Sendable {
    // Transfer slots (shared fairly among clients, `TransferSlots`).
    /// Wait for a transfer slot; `slotGranted` follows at once when a slot is free.
    case requestSlot
    case leaveQueue
    /// Give the slot back (the next queued download gets it).
    case releaseSlot

    // Attempts.
    /// Prepare the partial and start a transfer, resuming from the kept bytes when it can.
    case startAttempt(serial: UInt64)
    case cancelTransfer(serial: UInt64)
    /// Take the head the engine accepted: validator, total, file name, rate reset; write the body.
    case acceptBody
    /// The head refused itself (status, range, limit): abort without reading the body, keeping why.
    case refuseBody
    /// Nobody waits for the attempt any more (or it is not the current one): abort without reading the body.
    case abortUnwanted
    /// Record the synced checkpoint as the partial's durable offset.
    case keepDurableOffset
    /// Verify and publish the attempt's body, or settle its partial (work queue).
    case settle(serial: UInt64)
    /// An attempt the download no longer knows ended: close its partial and nothing else.
    case closeStaleAttempt
    /// Take the settled partial's length, hash state and durable offset.
    case keepSettledPartial
    /// Arm the retry timer `token` with the backoff after `attemptsMade` attempts (or `Retry-After`).
    case scheduleRetry(token: UInt64, attemptsMade: Int, retryAfter: String?)

    // The partial and the result.
    case discardPartial
    case forgetValidator
    /// Store the verified file's target, digest and size before the rename (a publishing intent).
    case recordPublishing
    case recordCompletion
    case recordFailure(DownloadFailure)
    case clearFailure
    /// Forget the vanished file's path, digest and size and the partial's validator.
    case resetResult
    /// Place the completed file into its storage class's area (work queue).
    case moveFile

    // Telling.
    case emit(LifecycleNotice)
    /// The stored state changed.
    case journal
    case housekeeping(Housekeeping)
}

/// The lifecycle events subscribers see (each carries the snapshot taken when it is applied).
enum LifecycleNotice: Equatable, Sendable {
    /// A transfer (re)started: the accepted head's offset, and whether kept bytes were discarded.
    case resumed
    case paused
    /// Back in the queue (a caller joined a paused or failed download, the operator lifted a hold),
    /// told before the slot is asked for: as progress, so watchers see the state change at once,
    /// not when a slot frees (a slot free now follows with `resumed`).
    case queued
    case completed
    case failed
}

/// Engine-wide bounds that a transition may bring into play.
enum Housekeeping: Equatable, Sendable {
    /// Paused downloads that keep nothing: bounded in number.
    case boundEmptyPaused
    /// The cache area over its byte budget: purge.
    case purgeCache
    /// Failed downloads: bounded in number and age.
    case forgetOldFailures
}
