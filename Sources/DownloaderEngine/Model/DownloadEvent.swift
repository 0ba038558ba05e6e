/// What subscribers to a download are told.
public enum DownloadEvent: Sendable, Equatable {
    /// Bytes moved (at most ~10 a second per download; conflated for slow subscribers), or the
    /// download queued again without a transfer yet (`LifecycleNotice.queued`).
    case progress(DownloadSnapshot)
    /// A transfer (re)started at `offset`; `restarted` is true when kept bytes were discarded
    /// (the origin's file changed, ignored the range, or had no usable validator).
    case resumed(offset: Int64, restarted: Bool, DownloadSnapshot)
    /// The last caller left, or the operator paused it (`snapshot.pausedBy` says which); the
    /// partial is kept (or discarded when not resumable).
    case paused(DownloadSnapshot)
    /// The file is verified and stored. Ends the subscription.
    case completed(DownloadSnapshot)
    /// The download failed. Ends the subscription.
    case failed(DownloadSnapshot)
    /// The download was removed (by the operator, or by retention) with its files and tokens; the
    /// snapshot is its last. Ends the subscription.
    case removed(by: RemovalCause, DownloadSnapshot)

    public var snapshot: DownloadSnapshot {
        switch self {
        case .progress(let s), .resumed(_, _, let s), .paused(let s), .completed(let s), .failed(let s), .removed(_, let s): return s
        }
    }

    /// True for the events after which a subscription ends.
    public var isTerminal: Bool {
        switch self {
        case .completed, .failed, .removed: return true
        default: return false
        }
    }
}
