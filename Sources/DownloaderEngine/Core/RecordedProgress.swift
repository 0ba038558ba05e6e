/// A download's newest progress as `ProgressPacer` recorded it. `version` grows with every record
/// (of any download), so a queue tells a progress it has not taken account of yet from one it has
/// (`SubscriberQueueState.progressSeen`); `sequence` is the engine's event sequence number of the
/// progress (0 when the relay recorded it), so a queue skips one its first element already reflects.
struct RecordedProgress: Sendable, Equatable {
    var event: DownloadEvent
    var version: UInt64
    var sequence: UInt64 = 0
}
