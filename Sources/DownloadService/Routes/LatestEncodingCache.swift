import DownloaderEngine
import Synchronization

/// The encoding of each download's latest value, shared by everyone who asks for that same value:
/// the `data:` of its latest event (with 10 000 subscribers an event is encoded once, not 10 000
/// times) and the JSON of its latest snapshot (a completed download's `GET /downloads/{id}` answer
/// does not change, so it is written once). Holds at most `capacity` downloads (then starts over);
/// a miss only costs an encoding. Only downloads being streamed or polled at the moment gain from
/// an entry, so the default is small: an event entry is about 2 KiB, and 4 096 of them showed up as
/// 8 MB of RSS growth in the fault soak.
final class LatestEncodingCache<Value: Equatable & Sendable, Encoded: Sendable>: Sendable {
    /// An entry in a box: a hit costs one reference, not a copy of every string the value holds.
    private final class Entry: Sendable {
        let value: Value
        let encoded: Encoded
        init(_ value: Value, _ encoded: Encoded) {
            self.value = value
            self.encoded = encoded
        }
    }

    private let entries = Mutex<[String: Entry]>([:])
    let capacity: Int

    init(capacity: Int = 256) {
        self.capacity = capacity
    }

    /// The encoding of `value` (download `id`'s), from the cache when its entry is this very value.
    func encoded(_ value: Value, id: String, encode: (Value) -> Encoded) -> Encoded {
        if let hit = entries.withLock({ $0[id] }), hit.value == value { return hit.encoded }
        let entry = Entry(value, encode(value))
        entries.withLock { entries in
            if entries.count >= capacity, entries[id] == nil { entries.removeAll(keepingCapacity: true) }
            entries[id] = entry
        }
        return entry.encoded
    }
}

/// Each download's latest event, as SSE `data:`.
typealias EventDataCache = LatestEncodingCache<DownloadEvent, String>

extension LatestEncodingCache where Value == DownloadEvent, Encoded == String {
    /// The data for `event`, from the cache when the download's latest entry is this very event.
    func data(for event: DownloadEvent, encode: (DownloadEvent) -> String) -> String {
        encoded(event, id: event.snapshot.id, encode: encode)
    }
}
