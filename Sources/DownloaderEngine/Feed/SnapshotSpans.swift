/// The ids a single process's fresh watchers' snapshots took (consecutive, from the sequence events
/// take theirs from): a `Last-Event-ID` inside one, short of its last item, is a snapshot cut off,
/// and a replay after it would never send the rest of it. Such an id gets a fresh snapshot instead
/// (cluster mode tells snapshot ids apart by their form, `ClusterEventIDs.isInsideSnapshot`).
/// Bounded: beyond `capacity` spans the oldest go, and every id up to where they ended counts as
/// cut off (a fresh snapshot, never a gap). Pure.
struct SnapshotSpans {
    static let capacity = 1_024

    let capacity: Int
    /// Each snapshot's ids short of its last item, oldest first.
    private var spans: [ClosedRange<UInt64>] = []
    /// Ids up to this one count as cut off (the spans forgotten ended there).
    private var forgottenUpTo: UInt64?

    init(capacity: Int = SnapshotSpans.capacity) {
        self.capacity = max(1, capacity)
    }

    /// A snapshot of `count` items took the ids from `first` on.
    mutating func record(first: UInt64, count: Int) {
        guard count >= 2 else { return }  // one item: nothing after it to miss
        if spans.count >= capacity {
            let oldest = spans.removeFirst()
            forgottenUpTo = max(forgottenUpTo ?? 0, oldest.upperBound)
        }
        spans.append(first...(first + UInt64(count) - 2))
    }

    /// Whether `id` is inside a snapshot, short of its last item.
    func cutsOff(_ id: UInt64) -> Bool {
        if let forgottenUpTo, id <= forgottenUpTo { return true }
        return spans.contains { $0.contains(id) }
    }
}
