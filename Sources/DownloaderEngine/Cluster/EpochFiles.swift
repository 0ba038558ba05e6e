/// The names each lease epoch writes under, so that two epochs never write the same file: a replica
/// that wakes after losing its lease can at worst add bytes to its own, abandoned partial. The row of
/// the lease names the partial in use; a completed file gets an epoch-specific name too and becomes
/// visible only through the fenced row update that records it.
enum EpochFiles {
    /// `<id>.<epoch>.part`.
    static func partial(id: String, epoch: Int64) -> String { "\(id).\(epoch).part" }

    /// The completed file's name: `<id>.<epoch>-<name>` (or `<id>.<epoch>` without a name).
    static func completed(id: String, epoch: Int64, name: String?) -> String {
        name.map { "\(id).\(epoch)-\($0)" } ?? "\(id).\(epoch)"
    }

    /// The epoch in a partial's file name of download `id`, or nil for any other name.
    static func epoch(ofPartial name: String, id: String) -> Int64? {
        guard name.hasPrefix(id + "."), name.hasSuffix(".part") else { return nil }
        let middle = name.dropFirst(id.count + 1).dropLast(5)
        guard !middle.isEmpty, middle.allSatisfy(\.isNumber), let epoch = Int64(middle), epoch > 0 else { return nil }
        return epoch
    }

    /// How a new epoch's partial starts: from nothing, or with the durable byte ranges of the
    /// previous epoch's file, copied to the same offsets (bytes past them may never have reached
    /// stable storage, or may belong to a writer that was fenced).
    enum Seed: Sendable, Equatable {
        case empty
        case copy(from: String, ranges: [Range<Int64>])
    }

    /// The seed of a new epoch, given what the lease row recorded (the prefix's durable offset) and
    /// the download's row (a segmented download's segments, each with its durable `next`).
    static func seed(previousPartial: String?, durableOffset: Int64, segments: [Segment]? = nil) -> Seed {
        let ranges = durableRanges(durableOffset: durableOffset, segments: segments)
        guard let previousPartial, !ranges.isEmpty else { return .empty }
        return .copy(from: previousPartial, ranges: ranges)
    }

    /// The durable bytes of a partial: the prefix up to `durableOffset` and every segment after the
    /// first up to its durable `next`, in file order, merged where they touch or overlap. Segments
    /// count also when the prefix kept nothing (they resume behind an empty prefix, as in the single
    /// process).
    static func durableRanges(durableOffset: Int64, segments: [Segment]?) -> [Range<Int64>] {
        var pieces: [Range<Int64>] = durableOffset > 0 ? [0..<durableOffset] : []
        for segment in (segments ?? []).dropFirst() where segment.next > segment.start {
            pieces.append(segment.start..<segment.next)
        }
        pieces.sort { $0.lowerBound < $1.lowerBound }
        var merged: [Range<Int64>] = []
        for piece in pieces {
            if let last = merged.last, piece.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, piece.upperBound)
            } else {
                merged.append(piece)
            }
        }
        return merged
    }

    /// What a new epoch resumes from once `copied` (the ranges the seeding actually copied, maybe
    /// fewer or shorter than asked when the previous file was short or missing) are in its partial:
    /// the prefix's kept bytes (at most `durableOffset`) and the segments, each resuming where the
    /// copied range holding its start ends (nil when there are none to resume: no segments, or
    /// nothing copied).
    static func seeded(durableOffset: Int64, segments: [Segment]?, copied: [Range<Int64>]) -> (kept: Int64, segments: [Segment]?) {
        let kept = min(durableOffset, copied.first { $0.lowerBound == 0 }?.upperBound ?? 0)
        guard var table = segments, table.count >= 2, !copied.isEmpty else { return (kept, nil) }
        for index in table.indices.dropFirst() {
            let segment = table[index]
            // Every copied byte is durable and of this version, also where the table is older than
            // the prefix's durable offset (a prefix that absorbed pieces the table still shows
            // untouched): a piece resumes where the copied range holding its start ends.
            let held = copied.first { $0.lowerBound <= segment.start && segment.start < $0.upperBound }
            table[index].next = held.map { min(segment.end, $0.upperBound) } ?? segment.start
        }
        table[0].next = min(table[0].end, max(table[0].start, kept))
        return (kept, table)
    }
}
