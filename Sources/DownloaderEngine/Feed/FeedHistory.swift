/// The feed's last `capacity` lifecycle events (and `created`), in id order, for `Last-Event-ID`
/// replay. Entries are addressed by their absolute index (how many were appended before them), so
/// a watcher's place survives older entries being dropped. Pure.
struct FeedHistory {
    struct Entry: Sendable {
        var id: UInt64
        var download: String
        var kind: FeedItem.Kind
    }

    let capacity: Int
    private var ring: [Entry] = []
    /// Ring index of the oldest entry once the ring is full.
    private var head = 0
    /// Entries appended so far (the absolute index of the next one).
    private(set) var appended = 0
    /// The highest id no longer replayable: that of the last dropped entry, or, before any was
    /// dropped, the id below this run's first (a client's id from an earlier run is never "inside").
    private(set) var droppedUpTo: UInt64

    init(capacity: Int, droppedUpTo: UInt64) {
        self.capacity = max(1, capacity)
        self.droppedUpTo = droppedUpTo
    }

    var count: Int { ring.count }
    var oldestIndex: Int { appended - ring.count }

    mutating func append(_ entry: Entry) {
        if ring.count < capacity {
            ring.append(entry)
        } else {
            droppedUpTo = ring[head].id
            ring[head] = entry
            head = (head + 1) % capacity
        }
        appended += 1
    }

    /// The entry at absolute index `index`; nil when dropped already or not appended yet.
    func entry(at index: Int) -> Entry? {
        guard index >= oldestIndex, index < appended else { return nil }
        let offset = index - oldestIndex
        return ring[ring.count < capacity ? offset : (head + offset) % capacity]
    }

    /// The absolute index of the first entry after id `id` (`appended` when none is newer), or nil
    /// when entries after `id` were dropped already (or `id` is from before this run): no replay.
    func index(after id: UInt64, newestIssued: UInt64) -> Int? {
        guard id >= droppedUpTo, id <= newestIssued else { return nil }
        var low = oldestIndex, high = appended  // first index whose id > `id`
        while low < high {
            let mid = (low + high) / 2
            if entry(at: mid)!.id > id { high = mid } else { low = mid + 1 }
        }
        return low
    }
}
