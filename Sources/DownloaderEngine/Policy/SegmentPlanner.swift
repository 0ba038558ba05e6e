/// One byte range of a segmented download: `[start, end)`, with `[start, next)` in the partial file.
/// Segment 0 is the file's prefix (appended, hashed as it arrives); the others are written in place.
struct Segment: Equatable, Sendable {
    var start: Int64
    var end: Int64
    /// The first byte not yet written (`start...end`).
    var next: Int64

    init(start: Int64, end: Int64, next: Int64? = nil) {
        self.start = start
        self.end = end
        self.next = next ?? start
    }

    var isComplete: Bool { next >= end }
    var remaining: Int64 { max(0, end - next) }
}

extension Array where Element == Segment {
    /// Bytes of the file written: everything before the first piece (a kept prefix) and each
    /// piece's written part.
    var writtenBytes: Int64 { (first?.start ?? 0) + reduce(0) { $0 + ($1.next - $1.start) } }

    /// Where the bytes written from the file's start without a gap end.
    var contiguous: Int64 {
        for segment in self where !segment.isComplete { return segment.next }
        return last?.end ?? 0
    }
}

/// Pure decisions of a segmented fetch: how many connections a download gets, where its segments
/// lie, whether a response allows segments at all, and whether a segment's response belongs to the
/// same version of the file.
enum SegmentPlanner {
    /// No segment is smaller than this (8 MiB): smaller ones cost more in requests than they gain.
    static let minimumSegment: Int64 = 8 << 20

    /// The connections a caller may have: what it asked for (at least 1), at most `limit`.
    static func granted(requested: Int, limit: Int) -> Int {
        max(1, min(requested, max(1, limit)))
    }

    /// The connections `remaining` bytes warrant at most: one per `minimumSegment`, at least one.
    static func connections(granted: Int, remaining: Int64, minimumSegment: Int64 = minimumSegment) -> Int {
        guard remaining > 0, minimumSegment > 0 else { return 1 }
        return Int(max(1, min(Int64(max(1, granted)), remaining / minimumSegment)))
    }

    /// At most this many pieces per download (so that its stored segments stay a few KiB).
    static let maximumPieces: Int64 = 256

    /// `[offset, total)` cut into pieces of `minimumSegment` (larger when that would make more than
    /// `maximumPieces`; the last one takes the remainder), handed to the connections in file order,
    /// so that the file's contiguous prefix (what is hashed, and what readers see) grows while the
    /// pieces arrive instead of only at the end.
    static func pieces(total: Int64, from offset: Int64, minimumSegment: Int64 = minimumSegment) -> [Segment] {
        let remaining = max(0, total - offset)
        // Rounded up without `remaining + maximumPieces - 1`, which overflows for an origin's
        // `Content-Length` near Int64.max (and would stop the process).
        let perPiece = remaining / maximumPieces + (remaining % maximumPieces == 0 ? 0 : 1)
        let size = max(1, minimumSegment, perPiece)
        let count = max(1, remaining / size)
        return (0..<count).map { index in
            let start = offset + index * size
            return Segment(start: start, end: index == count - 1 ? total : start + size)
        }
    }

    /// Kept pieces continued on one connection: each run of pieces after the first that hold
    /// nothing becomes one piece (one ranged request instead of one per piece; with one connection
    /// nothing is gained by cutting them).
    static func mergingEmpty(_ pieces: [Segment]) -> [Segment] {
        guard let first = pieces.first else { return [] }
        var merged = [first]
        for piece in pieces.dropFirst() {
            if merged.count > 1, let last = merged.last, last.next == last.start, piece.next == piece.start {
                merged[merged.count - 1].end = piece.end
            } else {
                merged.append(piece)
            }
        }
        return merged
    }

    /// Whether an accepted response allows ranged requests for the rest of the file: a strong
    /// validator (`validator`, as `ResumePlan.validator(of:)` found it), a known total, and
    /// `Accept-Ranges: bytes` (or the response is itself a 206, which proves it).
    static func allowsSegments(_ head: ResponseHead, validator: Validator?, total: Int64?) -> Bool {
        guard validator?.ifRange != nil, let total, total > 0 else { return false }
        if head.status == 206 { return true }
        let ranges = head.headers["accept-ranges"] ?? []
        return ranges.contains { value in
            value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "bytes" }
        }
    }

    /// What a segment's response means.
    enum SegmentVerdict: Equatable, Sendable {
        /// Write the body at the segment's next byte.
        case accept
        /// Not this version's bytes (a 200, another validator, a Content-Range that does not match):
        /// the segments are abandoned and the download starts again from 0 on one connection.
        case abandon(String)
        /// A transient HTTP answer (5xx, 408): the segment may ask again.
        case retry(Int)
        /// The origin will not serve this connection (429, or 503 with `Retry-After`: an overload;
        /// 401, 403…: a refusal the first connection did not get): the download goes on with one
        /// connection, after `Retry-After` when given.
        case refuse(Int, retryAfter: String?)
    }

    /// Judges the head answering `Range: bytes=first-last` with `If-Range` of `validator`.
    static func judgeSegment(_ head: ResponseHead, first: Int64, last: Int64, total: Int64, validator: Validator) -> SegmentVerdict {
        switch head.status {
        case 206:
            break
        case 200, 203:
            return .abandon("a segment got a whole body (\(head.status)): the file changed")
        case 416:
            return .abandon("a segment's range no longer fits the file (416)")
        case 429:
            return .refuse(head.status, retryAfter: head.value("retry-after"))
        case 503 where head.value("retry-after") != nil:
            return .refuse(head.status, retryAfter: head.value("retry-after"))
        case 408, 500...599:
            return .retry(head.status)
        default:
            return .refuse(head.status, retryAfter: nil)
        }
        guard let range = ContentRange.parse(head.value("content-range") ?? "") else {
            return .abandon("a segment's 206 has no usable Content-Range")
        }
        if let coding = ResumePlan.coding(of: head) {
            return .abandon("a segment came in a content coding (\(coding)), not the file's bytes")
        }
        // A range short of the one asked for (an origin that caps its answers' length) holds the
        // piece's next bytes: they are written, and the piece asks again from where they end.
        // `bytes a-b/*`: the size known from the first answer stays known, as on one connection.
        guard range.first == first, range.last <= last, range.total.map({ $0 == total }) ?? true else {
            let seen = "\(range.first)-\(range.last)/\(range.total.map(String.init) ?? "*")"
            return .abandon("a segment asked for \(first)-\(last)/\(total), got \(seen)")
        }
        guard range.agrees(withLengthOf: head) else {
            return .abandon("a segment's Content-Length is not the length of its Content-Range \(range.first)-\(range.last)")
        }
        if let etag = validator.etag, let offered = head.value("etag")?.trimmingCharacters(in: .whitespaces), offered != etag {
            return .abandon("a segment's ETag changed from \(etag) to \(offered)")
        }
        if let date = validator.lastModified, let offered = head.value("last-modified")?.trimmingCharacters(in: .whitespaces),
           offered != date {
            return .abandon("a segment's Last-Modified changed from \(date) to \(offered)")
        }
        return .accept
    }
}
