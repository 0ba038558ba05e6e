/// Which handler owns each descriptor registered with an event loop, indexed by fd, with an id per
/// registration: an event or timer that carries the id of a closed (and possibly reused) descriptor
/// never reaches its new owner. Loop thread only.
struct RegistrationTable {
    private struct Entry {
        var id: UInt32
        var handler: Selectable
    }

    private var entries: [Entry?] = []
    private var lastID: UInt32 = 0

    /// Records `handler` as the owner of `fd` under a new id, which it returns.
    mutating func add(fd: Int32, handler: Selectable) -> UInt32 {
        lastID &+= 1
        let index = Int(fd)
        if index >= entries.count {
            entries.append(contentsOf: repeatElement(nil, count: max(index + 1 - entries.count, entries.count)))
        }
        entries[index] = Entry(id: lastID, handler: handler)
        return lastID
    }

    mutating func remove(fd: Int32) {
        if Int(fd) < entries.count { entries[Int(fd)] = nil }
    }

    /// The owner of `fd` if it is still registered under `id`.
    func handler(fd: Int, id: UInt32) -> Selectable? {
        guard fd < entries.count, let entry = entries[fd], entry.id == id else { return nil }
        return entry.handler
    }
}
