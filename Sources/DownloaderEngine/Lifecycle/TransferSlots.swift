/// The engine's transfer slots: at most `capacity` downloads hold one at a time; the others wait.
/// A freed slot goes to the longest-waiting download of the client holding the fewest slots (a
/// download's client: who asked for it first, as the service groups them), so one client's
/// hundred downloads never starve another's one; with a single client (or none named) that is
/// plain FIFO. Pure bookkeeping: the engine tells the download it names that it got a slot.
struct TransferSlots: Sendable {
    let capacity: Int
    /// Holders and their clients.
    private(set) var holding: [String: String?] = [:]
    /// Waiting downloads in the order they asked, with their clients.
    private(set) var queue: [(id: String, client: String?)] = []

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var active: Int { holding.count }
    var holders: Set<String> { Set(holding.keys) }
    var waiting: [String] { queue.map(\.id) }

    /// Asks for a slot for `id` (asked for by `client`): true when it holds one now, false when it
    /// waits (once) in the queue.
    mutating func request(_ id: String, client: String? = nil) -> Bool {
        if holding[id] != nil { return true }
        if holding.count < capacity {
            holding[id] = .some(client)
            return true
        }
        if !queue.contains(where: { $0.id == id }) { queue.append((id, client)) }
        return false
    }

    /// `id` no longer waits.
    mutating func leave(_ id: String) {
        if let index = queue.firstIndex(where: { $0.id == id }) { queue.remove(at: index) }
    }

    /// `id` gives its slot back; returns the download that takes it over, if any and while
    /// `granting` (not once the engine shuts down): the longest waiting of the client that holds
    /// the fewest slots.
    mutating func release(_ id: String, granting: Bool = true) -> String? {
        guard holding.removeValue(forKey: id) != nil, granting, holding.count < capacity, !queue.isEmpty else { return nil }
        var held: [String?: Int] = [:]
        for client in holding.values { held[client, default: 0] += 1 }
        var chosen = 0
        for index in queue.indices.dropFirst() where held[queue[index].client, default: 0] < held[queue[chosen].client, default: 0] {
            chosen = index
        }
        let next = queue.remove(at: chosen)
        holding[next.id] = .some(next.client)
        return next.id
    }

    /// Nobody waits any more (shutdown: queued downloads are stored as queued and carry on after the restart).
    mutating func clearWaiting() {
        queue.removeAll()
    }
}
