import Testing
@testable import DownloaderEngine

/// The pure decisions of a segmented fetch, as tables.
@Suite struct SegmentPlannerTests {
    static let mib: Int64 = 1 << 20

    @Test(arguments: [
        // (requested, limit, granted)
        (1, 1, 1), (4, 1, 1), (4, 4, 4), (16, 4, 4), (2, 8, 2), (0, 4, 1), (-3, 4, 1), (4, 0, 1),
    ])
    func grantedIsClampedToTheLimit(_ row: (Int, Int, Int)) {
        #expect(SegmentPlanner.granted(requested: row.0, limit: row.1) == row.2)
    }

    @Test(arguments: [
        // (granted, remaining bytes, connections): segments of at least 8 MiB
        (4, 1024 * mib, 4), (4, 32 * mib, 4), (4, 32 * mib - 1, 3), (4, 16 * mib, 2), (4, 16 * mib - 1, 1),
        (4, 8 * mib, 1), (4, 0, 1), (1, 1024 * mib, 1), (16, 100 * mib, 12),
    ])
    func connectionsNeverMakeSegmentsBelowTheMinimum(_ row: (Int, Int64, Int)) {
        #expect(SegmentPlanner.connections(granted: row.0, remaining: row.1) == row.2)
    }

    @Test func piecesCoverTheRestOfTheFileInOrder() {
        let plan = SegmentPlanner.pieces(total: 40_003, from: 3, minimumSegment: 10_000)
        #expect(plan == [Segment(start: 3, end: 10_003), Segment(start: 10_003, end: 20_003),
                         Segment(start: 20_003, end: 30_003), Segment(start: 30_003, end: 40_003)])
        // The remainder goes to the last piece: none is smaller than the minimum.
        let uneven = SegmentPlanner.pieces(total: 10, from: 0, minimumSegment: 3)
        #expect(uneven.map(\.start) == [0, 3, 6])
        #expect(uneven.map(\.end) == [3, 6, 10])
        #expect(SegmentPlanner.pieces(total: 1000, from: 0, minimumSegment: 1000) == [Segment(start: 0, end: 1000)])
        #expect(SegmentPlanner.pieces(total: 100, from: 100, minimumSegment: 10) == [Segment(start: 100, end: 100)])
        // 1 GiB in 8 MiB pieces: 128 of them; 4 GiB would be 512: 256 pieces of 16 MiB instead.
        #expect(SegmentPlanner.pieces(total: 1024 * Self.mib, from: 0).count == 128)
        let big = SegmentPlanner.pieces(total: 4096 * Self.mib, from: 0)
        #expect(big.count == 256 && big.allSatisfy { $0.end - $0.start == 16 * Self.mib })
        let odd = SegmentPlanner.pieces(total: 16 * Self.mib + 4096, from: 0)
        #expect(odd.map(\.end) == [8 * Self.mib, 16 * Self.mib + 4096])
    }

    /// On one connection, runs of pieces after the prefix that hold nothing become one piece; the
    /// prefix and pieces holding bytes stay as they are.
    @Test func oneConnectionMergesRunsOfEmptyPieces() {
        let pieces = [Segment(start: 0, end: 10, next: 3), Segment(start: 10, end: 20), Segment(start: 20, end: 30, next: 25),
                      Segment(start: 30, end: 40), Segment(start: 40, end: 50), Segment(start: 50, end: 60)]
        #expect(SegmentPlanner.mergingEmpty(pieces) == [Segment(start: 0, end: 10, next: 3), Segment(start: 10, end: 20),
                                                       Segment(start: 20, end: 30, next: 25), Segment(start: 30, end: 60)])
        let complete = [Segment(start: 0, end: 10, next: 0), Segment(start: 10, end: 20, next: 20), Segment(start: 20, end: 30)]
        #expect(SegmentPlanner.mergingEmpty(complete) == complete)
        #expect(SegmentPlanner.mergingEmpty([]) == [])
    }

    /// An origin may announce any `Content-Length` up to Int64.max: planning never overflows.
    @Test(arguments: [Int64.max, Int64.max - 1, Int64.max - 255, Int64.max / 2 + 1])
    func piecesOfTheLargestTotalsStayWithinBounds(_ total: Int64) {
        for offset in [Int64(0), 1, total / 3, total - 1] {
            let plan = SegmentPlanner.pieces(total: total, from: offset)
            #expect(plan.count <= 256 && plan.first?.start == offset && plan.last?.end == total)
            #expect(zip(plan, plan.dropFirst()).allSatisfy { $0.end == $1.start && $0.end > $0.start })
        }
    }

    static func head(_ status: Int, _ headers: [String: String]) -> ResponseHead {
        ResponseHead(status: status, headers: headers.reduce(into: [:]) { $0[$1.key.lowercased()] = [$1.value] },
                     effectiveURL: "http://o.test/f")
    }

    static let strong = Validator(etag: "\"v1\"", lastModified: nil)

    @Test(arguments: [
        // (status, headers, validator known, total known, allowed)
        (200, ["Accept-Ranges": "bytes"], true, true, true),
        (200, ["Accept-Ranges": "none"], true, true, false),
        (200, [:], true, true, false),
        (200, ["Accept-Ranges": "bytes"], false, true, false),  // a weak ETag gives no validator
        (200, ["Accept-Ranges": "bytes"], true, false, false),
        (200, ["Accept-Ranges": "Bytes, other"], true, true, true),
        (206, [:], true, true, true),  // a 206 proves ranges
    ] as [(Int, [String: String], Bool, Bool, Bool)])
    func segmentsNeedAStrongValidatorAKnownTotalAndRanges(_ row: (Int, [String: String], Bool, Bool, Bool)) {
        let allowed = SegmentPlanner.allowsSegments(Self.head(row.0, row.1), validator: row.2 ? Self.strong : nil,
                                                    total: row.3 ? 1000 : nil)
        #expect(allowed == row.4)
    }

    @Test func weakETagYieldsNoValidator() {
        #expect(ResumePlan.validator(of: Self.head(200, ["ETag": "W/\"v1\"", "Accept-Ranges": "bytes"])) == nil)
    }

    @Test(arguments: [
        (206, ["Content-Range": "bytes 100-199/1000", "ETag": "\"v1\""], SegmentPlanner.SegmentVerdict.accept),
        (206, ["Content-Range": "bytes 100-199/1000"], .accept),
        (200, ["ETag": "\"v1\""], .abandon("a segment got a whole body (200): the file changed")),
        (206, ["Content-Range": "bytes 100-199/1000", "ETag": "\"v2\""], .abandon("a segment's ETag changed from \"v1\" to \"v2\"")),
        (206, ["Content-Range": "bytes 100-199/2000", "ETag": "\"v1\""], .abandon("a segment asked for 100-199/1000, got 100-199/2000")),
        (206, ["Content-Range": "bytes 0-199/1000", "ETag": "\"v1\""], .abandon("a segment asked for 100-199/1000, got 0-199/1000")),
        // The size unsaid: the one known stays known (as a resume on one connection takes it).
        (206, ["Content-Range": "bytes 100-199/*"], .accept),
        (206, ["Content-Range": "bytes 100-149/*"], .accept),
        (206, ["Content-Range": "bytes 100-200/*"], .abandon("a segment asked for 100-199/1000, got 100-200/*")),
        (206, ["Content-Range": "bytes 100-149/1000", "ETag": "\"v1\""], .accept),  // capped: the rest is asked for next
        (206, ["Content-Range": "bytes 100-149/1000", "Content-Length": "50"], .accept),
        // A body that is not the range it names (an origin claiming a short range and sending more).
        (206, ["Content-Range": "bytes 100-100/1000", "Content-Length": "100"],
         .abandon("a segment's Content-Length is not the length of its Content-Range 100-100")),
        (206, ["Content-Range": "bytes 100-299/1000", "ETag": "\"v1\""], .abandon("a segment asked for 100-199/1000, got 100-299/1000")),
        (206, [:], .abandon("a segment's 206 has no usable Content-Range")),
        (206, ["Content-Range": "bytes 100-199/1000", "ETag": "\"v1\"", "Content-Encoding": "gzip"],
         .abandon("a segment came in a content coding (gzip), not the file's bytes")),
        (416, [:], .abandon("a segment's range no longer fits the file (416)")),
        (500, [:], .retry(500)),
        (408, [:], .retry(408)),
        (503, [:], .retry(503)),
        (503, ["Retry-After": "30"], .refuse(503, retryAfter: "30")),
        (429, ["Retry-After": "5"], .refuse(429, retryAfter: "5")),
        (403, [:], .refuse(403, retryAfter: nil)),
        (404, [:], .refuse(404, retryAfter: nil)),
    ] as [(Int, [String: String], SegmentPlanner.SegmentVerdict)])
    func segmentHeads(_ row: (Int, [String: String], SegmentPlanner.SegmentVerdict)) {
        let verdict = SegmentPlanner.judgeSegment(Self.head(row.0, row.1), first: 100, last: 199, total: 1000, validator: Self.strong)
        #expect(verdict == row.2)
    }

    @Test func lastModifiedValidatorIsComparedToo() {
        let date = Validator(etag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        let moved = Self.head(206, ["Content-Range": "bytes 100-199/1000", "Last-Modified": "Mon, 07 Nov 1994 08:49:37 GMT"])
        #expect(SegmentPlanner.judgeSegment(moved, first: 100, last: 199, total: 1000, validator: date)
                == .abandon("a segment's Last-Modified changed from Sun, 06 Nov 1994 08:49:37 GMT to Mon, 07 Nov 1994 08:49:37 GMT"))
    }
}
