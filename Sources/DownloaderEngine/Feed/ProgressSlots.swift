/// Each download's newest progress since its last lifecycle event, with the feed id it got when it
/// arrived; watchers go round them (`FeedWatcherState`). A lifecycle event clears the download's
/// slot (the snapshot it carries supersedes older progress). Pure.
struct ProgressSlots {
    struct Slot: Sendable {
        var download: String
        var event: DownloadEvent
        var id: UInt64
    }

    private(set) var slots: [Slot] = []
    private var index: [String: Int] = [:]

    var count: Int { slots.count }
    var isEmpty: Bool { slots.isEmpty }

    subscript(position: Int) -> Slot { slots[position] }

    /// Returns true when the download had no slot (the count changed).
    @discardableResult
    mutating func set(_ event: DownloadEvent, of download: String, id: UInt64) -> Bool {
        if let at = index[download] {
            slots[at].event = event
            slots[at].id = id
            return false
        }
        index[download] = slots.count
        slots.append(Slot(download: download, event: event, id: id))
        return true
    }

    /// Returns true when the download had a slot.
    @discardableResult
    mutating func remove(_ download: String) -> Bool {
        guard let at = index.removeValue(forKey: download) else { return false }
        let last = slots.removeLast()
        if at < slots.count {
            slots[at] = last
            index[last.download] = at
        }
        return true
    }
}
