/// The ids a single process's fresh watchers' snapshots took (consecutive, from the sequence events
/// take theirs from): a `Last-Event-ID` inside one, short of its last item, is a snapshot cut off,
/// and a replay after it would never send the rest of it. Such an id gets a fresh snapshot instead
/// (cluster mode tells snapshot ids apart by their form, `ClusterEventIDs.isInsideSnapshot`).
/// Bounded: spans the history no longer reaches go first (an id before the history gets a fresh
/// snapshot anyway); beyond `capacity` spans the oldest go into one forgotten stretch, from the
/// first forgotten span's start to the last one's end, every id of which counts as cut off (a
/// fresh snapshot, never a gap; ids before it, such as a watcher's older lifecycle event, still
/// replay). Pure.
struct SnapshotSpans {
    static let capacity = 16_384

    let capacity: Int
    /// Each snapshot's ids short of its last item, oldest first.
    private var spans: [ClosedRange<UInt64>] = []
    /// The stretch the forgotten spans covered: its ids count as cut off.
    private var forgotten: ClosedRange<UInt64>?

    init(capacity: Int = SnapshotSpans.capacity) {
        self.capacity = max(1, capacity)
    }

    /// A snapshot of `count` items took the ids from `first` on; the history holds no id up to
    /// `outsideHistory`.
    mutating func record(first: UInt64, count: Int, outsideHistory: UInt64 = 0) {
        guard count >= 2 else { return }  // one item: nothing after it to miss
        if spans.count >= capacity {
            spans.removeFirst(spans.firstIndex { $0.upperBound > outsideHistory } ?? spans.count)
            if let stretch = forgotten, stretch.upperBound <= outsideHistory { forgotten = nil }
        }
        if spans.count >= capacity {
            let oldest = spans.removeFirst()
            forgotten = (forgotten?.lowerBound ?? oldest.lowerBound)...oldest.upperBound
        }
        spans.append(first...(first + UInt64(count) - 2))
    }

    /// Whether `id` is inside a snapshot, short of its last item.
    func cutsOff(_ id: UInt64) -> Bool {
        if let forgotten, forgotten.contains(id) { return true }
        return spans.contains { $0.contains(id) }
    }
}
