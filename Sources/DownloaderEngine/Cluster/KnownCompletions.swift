/// A completed download this replica has seen (ended here, or read from the database): enough to
/// serve its file without the database (`GET|HEAD /downloads/{id}/file`, `/fetch` of its URL).
struct KnownCompletion: Sendable, Equatable {
    var id: String
    /// The download's coalescing key as a lease name (`CoalescingKey.leaseName`): `/fetch` finds it by URL.
    var leaseKey: String
    var file: CompletedFile
    /// What a reader of the file sees (content type, the origin's validator, version, name, size).
    var tail: TailState
}

/// Cluster mode: the newest `capacity` completed downloads this replica has seen, so that files
/// already known complete are served while the database is unreachable (the one exception
/// to `503 database_unavailable`). Private (credentialed) downloads are never remembered: who may
/// read them only the database says. A download the database later shows not completed, or not at
/// all, is forgotten. Pure; the oldest remembered goes first when full.
struct KnownCompletions: Sendable {
    static let defaultCapacity = 4_096

    let capacity: Int
    private var byID: [String: (entry: KnownCompletion, serial: UInt64)] = [:]
    private var idOfKey: [String: String] = [:]
    /// Ids in the order they were remembered, with the serial they were remembered under (a
    /// forgotten or re-remembered id's older places are skipped).
    private var order: [(id: String, serial: UInt64)] = []
    private var head = 0
    private var serial: UInt64 = 0

    init(capacity: Int = KnownCompletions.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    var count: Int { byID.count }

    func entry(id: String) -> KnownCompletion? { byID[id]?.entry }

    func entry(leaseKey: String) -> KnownCompletion? { idOfKey[leaseKey].flatMap { byID[$0]?.entry } }

    mutating func remember(_ entry: KnownCompletion) {
        if let known = byID[entry.id] {
            if idOfKey[known.entry.leaseKey] == entry.id { idOfKey[known.entry.leaseKey] = nil }
            byID[entry.id] = (entry, known.serial)
        } else {
            serial += 1
            byID[entry.id] = (entry, serial)
            order.append((entry.id, serial))
        }
        idOfKey[entry.leaseKey] = entry.id
        while byID.count > capacity, head < order.count {
            let oldest = order[head]
            head += 1
            if byID[oldest.id]?.serial == oldest.serial { forget(oldest.id) }
        }
        compact()
    }

    mutating func forget(_ id: String) {
        guard let known = byID.removeValue(forKey: id) else { return }
        if idOfKey[known.entry.leaseKey] == id { idOfKey[known.entry.leaseKey] = nil }
    }

    /// Keeps `order` within twice the capacity (places of forgotten ids dropped).
    private mutating func compact() {
        guard order.count - head > 2 * capacity || head > capacity else { return }
        order = order[head...].filter { byID[$0.id]?.serial == $0.serial }
        head = 0
    }
}
