import DownloaderEngine
import Synchronization

/// The encoded `data:` of the latest event of each download, shared by all its progress streams:
/// with 10 000 subscribers an event is encoded once, not 10 000 times. Holds at most `capacity`
/// downloads (then starts over); a miss only costs an encoding. Only downloads whose events are
/// being streamed at the moment gain from an entry, so the default is small: an entry (event and
/// data) is about 2 KiB, and 4 096 of them showed up as 8 MB of RSS growth in the fault soak.
final class EventDataCache: Sendable {
    private let entries = Mutex<[String: (event: DownloadEvent, data: String)]>([:])
    let capacity: Int

    init(capacity: Int = 256) {
        self.capacity = capacity
    }

    /// The data for `event`, from the cache when the download's latest entry is this very event.
    func data(for event: DownloadEvent, encode: (DownloadEvent) -> String) -> String {
        let id = event.snapshot.id
        if let hit = entries.withLock({ $0[id] }), hit.event == event { return hit.data }
        let data = encode(event)
        entries.withLock { entries in
            if entries.count >= capacity, entries[id] == nil { entries.removeAll(keepingCapacity: true) }
            entries[id] = (event, data)
        }
        return data
    }
}
