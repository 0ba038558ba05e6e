import DownloaderEngine

/// Where a streaming `/fetch` response stands and what it sends next, given what the download has
/// on disk (`TailState`). Pure; `FetchCursorTests` is its table.
///
/// Bytes of one version only: when the version changes the response is aborted (never spliced).
/// With the size known, the file's last byte waits for the verdict (verified and durable); a
/// failure then aborts one byte short. With the size unknown, the end of the chunked body is the
/// verdict.
struct FetchCursor: Equatable {
    enum Step: Equatable {
        /// Send bytes `from..<to` of the file.
        case send(from: Int64, to: Int64)
        case finish
        case abort(String)
        /// Nothing to send yet.
        case wait
    }

    let plan: FetchPlan.Streaming
    /// The next byte to send.
    private(set) var next: Int64

    init(_ plan: FetchPlan.Streaming) {
        self.plan = plan
        next = plan.start
    }

    func step(_ tail: TailState) -> Step {
        guard tail.generation == plan.generation else { return .abort("the file changed at the origin") }
        switch tail.phase {
        case .failed(let failure, _):
            return .abort("the download failed: \(failure.code.rawValue)")
        case .completed:
            let size = tail.total ?? tail.available
            if let end = plan.end, end >= size { return .abort("the range ends beyond the file") }
            let stop = (plan.end ?? (size - 1)) + 1
            return next < stop ? .send(from: next, to: stop) : .finish
        case .waiting, .flowing:
            var upTo = tail.available
            if let end = plan.end { upTo = min(upTo, end + 1) }
            if plan.endsAtLastByte, let total = tail.total { upTo = min(upTo, total - 1) }  // the verdict first
            if upTo > next { return .send(from: next, to: upTo) }
            if let end = plan.end, next == end + 1, !plan.endsAtLastByte { return .finish }
            return .wait
        }
    }

    mutating func sent(upTo offset: Int64) {
        next = max(next, offset)
    }
}
