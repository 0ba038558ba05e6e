/// The engine's transfer slots: at most `capacity` downloads hold one at a time; the others wait,
/// each in its client's queue (a download's client: who asked for it first, as the service groups
/// them). A freed slot goes to the client holding the fewest, among those the one served least
/// recently (round robin), and within a client to its longest-waiting download: one client's
/// hundred downloads never starve another's one, however many clients wait. With a single client
/// (or none named) that is plain FIFO. Pure bookkeeping: the engine tells the download it names
/// that it got a slot. A release costs a pass over the holders and the waiting clients, not over
/// every waiting download.
struct TransferSlots: Sendable {
    let capacity: Int
    /// Holders and their clients.
    private(set) var holding: [String: String?] = [:]
    /// Waiting downloads per client, each queue in the order asked (never empty).
    private var queues: [String?: [String]] = [:]
    /// Each waiting download's client and when it asked (a count of requests).
    private var asking: [String: (client: String?, at: UInt64)] = [:]
    /// When each client holding or waiting was last granted a slot (a count of grants).
    private var servedAt: [String?: UInt64] = [:]
    private var requests: UInt64 = 0
    private var grants: UInt64 = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var active: Int { holding.count }
    var holders: Set<String> { Set(holding.keys) }
    /// Every waiting download, in the order asked.
    var waiting: [String] { asking.sorted { $0.value.at < $1.value.at }.map(\.key) }

    /// Asks for a slot for `id` (asked for by `client`): true when it holds one now, false when it
    /// waits (once) in its client's queue.
    mutating func request(_ id: String, client: String? = nil) -> Bool {
        if holding[id] != nil { return true }
        if holding.count < capacity {
            grant(id, to: client)
            return true
        }
        if asking[id] == nil {
            requests += 1
            asking[id] = (client, requests)
            queues[client, default: []].append(id)
        }
        return false
    }

    /// `id` no longer waits.
    mutating func leave(_ id: String) {
        guard let (client, _) = asking.removeValue(forKey: id) else { return }
        queues[client]?.removeAll { $0 == id }
        if queues[client]?.isEmpty == true { queues[client] = nil }
        forgetIfIdle(client)
    }

    /// `id` gives its slot back; returns the download that takes it over, if any and while
    /// `granting` (not once the engine shuts down).
    mutating func release(_ id: String, granting: Bool = true) -> String? {
        guard let client = holding.removeValue(forKey: id) else { return nil }
        forgetIfIdle(client)
        guard granting, holding.count < capacity, !queues.isEmpty else { return nil }
        var held: [String?: Int] = [:]
        for holder in holding.values { held[holder, default: 0] += 1 }
        func rank(_ client: String?) -> (Int, UInt64, UInt64) {
            (held[client, default: 0], servedAt[client, default: 0], queues[client].flatMap(\.first).flatMap { asking[$0]?.at } ?? 0)
        }
        guard let chosen = queues.keys.min(by: { rank($0) < rank($1) }), var queue = queues[chosen] else { return nil }
        let next = queue.removeFirst()
        queues[chosen] = queue.isEmpty ? nil : queue
        asking[next] = nil
        grant(next, to: chosen)
        return next
    }

    /// Nobody waits any more (shutdown: queued downloads are stored as queued and carry on after the restart).
    mutating func clearWaiting() {
        queues.removeAll()
        asking.removeAll()
        servedAt = servedAt.filter { client, _ in holding.values.contains(client) }
    }

    private mutating func grant(_ id: String, to client: String?) {
        grants += 1
        holding[id] = .some(client)
        servedAt[client] = grants
    }

    /// A client neither holding nor waiting is forgotten (its turn starts afresh).
    private mutating func forgetIfIdle(_ client: String?) {
        if queues[client] == nil && !holding.values.contains(client) { servedAt[client] = nil }
    }
}
