import Foundation

/// Tries in flight per receiver (a callback URL's host, whatever its port): at most `limit` at once,
/// the others waiting in order, so that one slow or silent receiver (each try may hold a worker
/// for the try's whole timeout) never holds every worker while other receivers wait. Pure: the
/// dispatcher keeps it under its lock. Bounded by the deliveries pending.
struct ReceiverLanes<Item> {
    let limit: Int
    private var running: [String: Int] = [:]
    private var waiting: [String: [Item]] = [:]

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// `item` for `receiver`: returned when it may run now, else kept until a try of the same
    /// receiver ended (`ended`).
    mutating func admit(_ item: Item, receiver: String) -> Item? {
        if running[receiver, default: 0] < limit {
            running[receiver, default: 0] += 1
            return item
        }
        waiting[receiver, default: []].append(item)
        return nil
    }

    /// A try of `receiver` ended: the next item of its lane to run in its place, if any.
    mutating func ended(receiver: String) -> Item? {
        if var queue = waiting[receiver], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[receiver] = queue.isEmpty ? nil : queue
            return next
        }
        let left = running[receiver, default: 1] - 1
        running[receiver] = left > 0 ? left : nil
        return nil
    }

    /// Tries running and waiting, over all receivers.
    var counts: (running: Int, waiting: Int) {
        (running.values.reduce(0, +), waiting.values.reduce(0) { $0 + $1.count })
    }

    /// The lane of `url`: its host (lower-cased), whatever the scheme and port, so that one host
    /// behind many ports is still one receiver.
    static func receiver(of url: String) -> String {
        URLComponents(string: url)?.host?.lowercased() ?? url
    }
}
