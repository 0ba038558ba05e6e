import DownloaderEngine
import MiniHTTPServer

/// What `GET /fetch` answers for a download in a given state: wait, serve the stored file, fail,
/// refuse, or stream a range of the version now landing. Pure; `FetchPlanTests` is its table.
enum FetchPlan: Equatable {
    /// Nothing to answer with yet: no head known (or the origin has not answered the resume).
    case wait
    /// Completed: served like `GET /downloads/{id}/file`.
    case serveStored
    /// The download failed before the response began: `502` (`504` when the last attempt stalled).
    case fail(status: Int, DownloadFailure)
    /// `409 changed` (a bare `Range` on a file that changed lately) or `416` (starts beyond the end).
    case refuse(Refusal)
    case stream(Streaming)
    /// `304`: an `If-None-Match` names the version now landing.
    case notModified(etag: String)
    /// The download was removed while the reader waited: `404 not_found`.
    case removed

    enum Refusal: Equatable {
        case changed
        case unsatisfiable(total: Int64)
        /// `412`: an `If-Match` that does not name the version landing.
        case precondition
    }

    /// A response that streams bytes `start…end` of one version as they land.
    struct Streaming: Equatable {
        var status: Int
        var start: Int64
        /// Inclusive; nil: up to the end, whatever it turns out to be.
        var end: Int64?
        var total: Int64?
        var contentRange: String?
        var etag: String
        var generation: UInt64

        var contentLength: Int64? { end.map { $0 - start + 1 } }
    }

    /// The strong validator a `/fetch` answer names its version by: the origin's ETag, else a tag
    /// of the download's version.
    static func etag(id: String, tail: TailState) -> String {
        if tail.validatorIsETag, let etag = tail.validator { return etag }
        return "\"\(id)-\(tail.generation)\""
    }

    /// `awaitingHead`: the reader must hear the origin's answer to a resume first (it joined a
    /// download that was not transferring). `changedRecently`: the file changed within the window in
    /// which a bare `Range` is refused. `mayChunk`: the client reads chunked bodies (HTTP/1.1); an
    /// HTTP/1.0 client's body of unknown size would end with the connection, a failure looking
    /// like the end of the file, so it waits for the verdict and gets the stored file.
    static func decide(id: String, tail: TailState, awaitingHead: Bool, range: String?, ifRange: String?,
                       ifNoneMatch: String? = nil, ifMatch: String? = nil, changedRecently: Bool, mayChunk: Bool = true) -> FetchPlan {
        var requested = ByteRangeRequest.parse(range)
        // A bare Range on a file that changed lately is refused, streaming or stored: the client's
        // bytes may be the old version's (a retrying wget would splice).
        let bareRangeOnChange = requested != .whole && ifRange == nil && changedRecently
        switch tail.phase {
        case .completed: return bareRangeOnChange ? .refuse(.changed) : .serveStored
        case .removed: return .removed
        case .failed(let failure, let stalled): return .fail(status: stalled ? 504 : 502, failure)
        case .waiting: return .wait
        case .flowing where awaitingHead: return .wait
        case .flowing: break
        }
        let etag = Self.etag(id: id, tail: tail)
        if let ifMatch, !ETagList.matches(ifMatch, etags: [etag], weak: false) { return .refuse(.precondition) }
        if let ifNoneMatch, ETagList.matches(ifNoneMatch, etags: [etag], weak: true) { return .notModified(etag: etag) }
        if bareRangeOnChange { return .refuse(.changed) }
        // An empty file has no last byte to hold back: its answer waits for the verdict (the stored file, or 502).
        if tail.total == 0 { return .wait }
        if let ifRange, ifRange.trimmingCharacters(in: .whitespaces) != etag {
            requested = .whole  // another version: the whole current one
        }
        let whole = Streaming(status: 200, start: 0, end: tail.total.map { $0 - 1 }, total: tail.total, contentRange: nil,
                              etag: etag, generation: tail.generation)
        guard let total = tail.total else {
            // Size unknown: only a closed range can be answered as a range.
            guard case .closed(let a, let b) = requested else { return mayChunk ? .stream(whole) : .wait }
            return .stream(Streaming(status: 206, start: a, end: b, total: nil, contentRange: "bytes \(a)-\(b)/*",
                                     etag: etag, generation: tail.generation))
        }
        let span: (Int64, Int64)
        switch requested {
        case .whole: return .stream(whole)
        case .closed(let a, let b): span = (a, min(b, total - 1))
        case .from(let a): span = (a, total - 1)
        case .suffix(let n): span = (max(0, total - n), total - 1)
        }
        guard span.0 < total else { return .refuse(.unsatisfiable(total: total)) }
        return .stream(Streaming(status: 206, start: span.0, end: span.1, total: total,
                                 contentRange: "bytes \(span.0)-\(span.1)/\(total)", etag: etag, generation: tail.generation))
    }
}
