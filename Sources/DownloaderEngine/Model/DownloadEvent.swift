/// What subscribers to a download are told.
public enum DownloadEvent: Sendable, Equatable {
    /// Bytes moved (at most ~10 a second per download; conflated for slow subscribers).
    case progress(DownloadSnapshot)
    /// A transfer (re)started at `offset`; `restarted` is true when kept bytes were discarded
    /// (the origin's file changed, ignored the range, or had no usable validator).
    case resumed(offset: Int64, restarted: Bool, DownloadSnapshot)
    /// The last caller left; the partial is kept (or discarded when not resumable).
    case paused(DownloadSnapshot)
    /// The file is verified and stored. Ends the subscription.
    case completed(DownloadSnapshot)
    /// The download failed. Ends the subscription.
    case failed(DownloadSnapshot)

    public var snapshot: DownloadSnapshot {
        switch self {
        case .progress(let s), .resumed(_, _, let s), .paused(let s), .completed(let s), .failed(let s): return s
        }
    }

    /// True for the events after which a subscription ends.
    public var isTerminal: Bool {
        switch self {
        case .completed, .failed: return true
        default: return false
        }
    }
}
