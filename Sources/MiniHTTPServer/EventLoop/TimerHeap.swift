/// A binary min-heap of deadlines (monotonic nanoseconds). Pure data structure, loop-thread only.
struct TimerHeap {
    enum Action {
        /// Fires for a registration only while it is still the same one (fd reuse-safe, holds no object).
        case registration(fd: Int32, id: UInt32)
        case closure(() -> Void)
    }

    struct Entry {
        var deadline: UInt64
        var sequence: UInt64
        var action: Action
    }

    private var entries: [Entry] = []
    private var sequence: UInt64 = 0

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    var nextDeadline: UInt64? { entries.first?.deadline }

    mutating func push(_ deadline: UInt64, _ action: Action) {
        sequence &+= 1
        entries.append(Entry(deadline: deadline, sequence: sequence, action: action))
        var i = entries.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(i, parent) else { break }
            entries.swapAt(i, parent)
            i = parent
        }
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popDue(now: UInt64) -> Entry? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        if entries.isEmpty { return first }
        entries[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var smallest = i
            if l < entries.count, less(l, smallest) { smallest = l }
            if r < entries.count, less(r, smallest) { smallest = r }
            if smallest == i { break }
            entries.swapAt(i, smallest)
            i = smallest
        }
        return first
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        let x = entries[a], y = entries[b]
        return x.deadline < y.deadline || (x.deadline == y.deadline && x.sequence < y.sequence)
    }
}
