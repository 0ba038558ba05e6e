/// The pieces of one segmented attempt as its crew hands them out (`SegmentCrew`): pure
/// bookkeeping, table-tested. Piece 0 is the prefix (the attempt's own transfer, always taken);
/// every other piece is taken by at most one fetch at a time, in file order (`claimFirst`) or from
/// the end (`claimLast`, the connection probe's), and counts its retries. `written` is
/// `segments.writtenBytes`, kept as the pieces advance (every write asks for it: summed over the
/// pieces each time, it cost more than the crew's other work).
struct PieceBook: Equatable, Sendable {
    private(set) var segments: [Segment]
    /// Bytes of the file written (not necessarily durable).
    private(set) var written: Int64
    let total: Int64
    private var taken: [Bool]
    private var retries: [Int]

    /// A complete piece counts as taken (nothing is left to fetch in it).
    init(segments: [Segment], total: Int64) {
        self.segments = segments
        self.total = total
        written = segments.writtenBytes
        taken = segments.indices.map { $0 == 0 || segments[$0].isComplete }
        retries = Array(repeating: 0, count: segments.count)
    }

    /// Where the prefix's transfer stops.
    var prefixEnd: Int64 { segments[0].end }

    /// Piece `index` is written up to `next`.
    mutating func advance(_ index: Int, to next: Int64) {
        written += next - segments[index].next
        segments[index].next = next
    }

    /// The first piece nobody has, now taken; nil when none is left.
    mutating func claimFirst() -> Int? {
        guard let index = taken.firstIndex(of: false) else { return nil }
        taken[index] = true
        return index
    }

    /// The last piece nobody has, now taken; nil when none is left.
    mutating func claimLast() -> Int? {
        guard let index = taken.lastIndex(of: false) else { return nil }
        taken[index] = true
        return index
    }

    /// The prefix reached its end: when the next piece with bytes is nobody's and none of it is
    /// written, the prefix takes it over and its new end is returned; the piece stays in the table,
    /// empty, at the new end, with the pieces taken over before it (so that the table stays
    /// contiguous, as `SegmentJournal` stores and reads it). nil: the prefix stops here.
    mutating func extendPrefix() -> Int64? {
        let end = segments[0].end
        guard let index = segments.indices.dropFirst().first(where: { segments[$0].end > end }),
              !taken[index], segments[index].start == end, segments[index].next == end else { return nil }
        let further = segments[index].end
        taken[index] = true
        segments[0].end = further
        for emptied in 1...index { segments[emptied] = Segment(start: further, end: further) }
        return further
    }

    /// Where the bytes written from the file's start without a gap end.
    var contiguous: Int64 { segments.contiguous }

    var allComplete: Bool { segments.allSatisfy(\.isComplete) }

    /// Piece `index` was cut: true (and the retry counted) while it has retries left of `limit`.
    mutating func retry(_ index: Int, limit: Int) -> Bool {
        guard retries[index] < limit else { return false }
        retries[index] += 1
        return true
    }
}
