/// What changed in a download's `TailState`, for whom to tell (`DownloadTail`). Pure.
enum TailChange: Equatable {
    /// Only `available` grew, in the same version, still flowing: told only to readers that
    /// asked for more bytes (a reader whose client is behind reads the newest state on its next
    /// turn anyway).
    case moreBytes
    /// Anything else (phase, version, heads, path, ...): told to every reader.
    case other

    /// The change from `before` to `after` (which differ).
    init(from before: TailState, to after: TailState) {
        var grown = before
        grown.available = after.available
        self = before.phase == .flowing && after.available > before.available && grown == after ? .moreBytes : .other
    }

    /// Two changes told as one.
    func merged(with next: TailChange) -> TailChange {
        self == .moreBytes && next == .moreBytes ? .moreBytes : .other
    }
}
