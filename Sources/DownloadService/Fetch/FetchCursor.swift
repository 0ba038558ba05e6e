import DownloaderEngine

/// Where a streaming `/fetch` response stands and what it sends next, given what the download has
/// on disk (`TailState`). Pure; `FetchCursorTests` is its table.
///
/// Bytes of one version only: when the version changes the response is aborted (never spliced).
/// The file's last byte waits for the verdict (verified and durable); a failure then aborts one
/// byte short: the bytes of this version already in the file go out first (the verdict may come
/// right after the last of them lands; those queued for a client that is behind are sent before
/// the connection closes), never the last byte. With the size unknown any byte landed may be the
/// last, so the last one landed waits (the stream trails the file by one byte); the end of the
/// chunked body comes with the verdict too.
struct FetchCursor: Equatable {
    enum Step: Equatable {
        /// Send bytes `from..<to` of the file.
        case send(from: Int64, to: Int64)
        case finish
        /// End the response at once: its queued ranges may no longer hold this version's bytes.
        case abort(String)
        /// End the response once what is queued went out (this version's bytes, short of the end).
        case fail(String)
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
        case .removed:
            return .abort("the download was removed")
        case .failed(let failure, _):
            let upTo = sendable(tail)
            if upTo > next { return .send(from: next, to: upTo) }
            return .fail("the download failed: \(failure.code.rawValue)")
        case .completed:
            let size = tail.total ?? tail.available
            if let end = plan.end, end >= size { return .abort("the range ends beyond the file") }
            let stop = (plan.end ?? (size - 1)) + 1
            return next < stop ? .send(from: next, to: stop) : .finish
        case .waiting, .flowing:
            let upTo = sendable(tail)
            if upTo > next { return .send(from: next, to: upTo) }
            if let end = plan.end, next == end + 1, !endsAtLastByte(tail) { return .finish }
            return .wait
        }
    }

    /// Where the bytes that may go out before the verdict end: what is in the file, within the
    /// range, short of the last byte of the file. With the size unknown, the last byte landed
    /// may be the file's: it goes out once a byte beyond it landed (else with the verdict).
    private func sendable(_ tail: TailState) -> Int64 {
        var upTo = tail.available
        if let end = plan.end { upTo = min(upTo, end + 1) }
        if let total = tail.total {
            if endsAtLastByte(tail) { upTo = min(upTo, total - 1) }  // the verdict first
        } else {
            upTo = min(upTo, tail.available - 1)
        }
        return max(upTo, next)
    }

    /// The response ends at the file's last byte, as far as `tail` tells: an open range, or a
    /// closed one reaching the size known now (it may have been unknown when the plan was made).
    func endsAtLastByte(_ tail: TailState) -> Bool {
        guard let end = plan.end else { return true }
        return tail.total.map { end >= $0 - 1 } ?? false
    }

    mutating func sent(upTo offset: Int64) {
        next = max(next, offset)
    }
}
