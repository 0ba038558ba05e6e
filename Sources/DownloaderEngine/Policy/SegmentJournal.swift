/// How a segmented download's segments are stored (the `segments` column): `start-end-next` per
/// segment, `;`-separated, in file order. Pure. Text that does not describe contiguous segments
/// with `start <= next <= end` reads as nil (the download then resumes its prefix alone).
enum SegmentJournal {
    static func text(_ segments: [Segment]) -> String {
        segments.map { "\($0.start)-\($0.end)-\($0.next)" }.joined(separator: ";")
    }

    static func segments(_ text: String) -> [Segment]? {
        var out: [Segment] = []
        for part in text.split(separator: ";", omittingEmptySubsequences: false) {
            let numbers = part.split(separator: "-", omittingEmptySubsequences: false).map { Int64($0) }
            guard numbers.count == 3, let start = numbers[0], let end = numbers[1], let next = numbers[2],
                  start >= 0, start <= next, next <= end else { return nil }
            if let last = out.last, last.end != start { return nil }
            out.append(Segment(start: start, end: end, next: next))
        }
        return out.count >= 2 ? out : nil
    }
}
