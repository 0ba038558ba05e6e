/// The engine's transfer slots: at most `capacity` downloads hold one at a time; the others wait
/// in FIFO order. Pure bookkeeping: the engine tells the download it names that it got a slot.
struct TransferSlots: Equatable, Sendable {
    let capacity: Int
    private(set) var holders: Set<String> = []
    private(set) var waiting: [String] = []

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var active: Int { holders.count }

    /// Asks for a slot for `id`: true when it holds one now, false when it waits (once) in the queue.
    mutating func request(_ id: String) -> Bool {
        if holders.contains(id) { return true }
        if holders.count < capacity {
            holders.insert(id)
            return true
        }
        if !waiting.contains(id) { waiting.append(id) }
        return false
    }

    /// `id` no longer waits.
    mutating func leave(_ id: String) {
        if let index = waiting.firstIndex(of: id) { waiting.remove(at: index) }
    }

    /// `id` gives its slot back; returns the download that takes it over (the longest waiting), if
    /// any and while `granting` (not once the engine shuts down).
    mutating func release(_ id: String, granting: Bool = true) -> String? {
        guard holders.remove(id) != nil, granting, holders.count < capacity, !waiting.isEmpty else { return nil }
        let next = waiting.removeFirst()
        holders.insert(next)
        return next
    }

    /// Nobody waits any more (shutdown: queued downloads are stored as queued and carry on after the restart).
    mutating func clearWaiting() {
        waiting.removeAll()
    }
}
