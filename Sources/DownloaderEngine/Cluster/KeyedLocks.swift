import Foundation
import Synchronization

/// One mutual-exclusion lock per key, made when a thread first asks for its key and dropped when
/// the last thread holding or waiting for it lets go: the table holds at most one entry per thread
/// that holds or waits, so it never grows with the keys ever seen.
///
/// Why: cluster mode's acquisitions, adoptions, takeovers and releases used to take one lock for the
/// whole replica, and a takeover holds it while it copies a partial (minutes for a large file on a
/// volume without server-side copy): a request for any other URL waited for that copy. Two paths on
/// the same lease still exclude each other; paths on different leases no longer wait for each other.
///
/// A lock is unlocked by the thread that locked it (each entry is a pthread mutex). The order rule
/// that keeps its users free of deadlocks is theirs to keep (`EngineCluster.adoption`).
final class KeyedLocks<Key: Hashable & Sendable>: Sendable {
    /// A key's lock and how many threads hold or wait for it (`users`, under the table's mutex).
    private final class Entry: @unchecked Sendable {
        let lock = NSLock()
        var users = 0
    }

    private let table = Mutex<[Key: Entry]>([:])

    init() {}

    /// Blocks until this thread holds `key`'s lock.
    func lock(_ key: Key) {
        let entry = table.withLock { table in
            let entry = table[key] ?? Entry()
            entry.users += 1
            table[key] = entry
            return entry
        }
        entry.lock.lock()
    }

    /// Lets go of `key`'s lock, held by this thread; its entry goes when nobody else holds or waits.
    func unlock(_ key: Key) {
        let entry = table.withLock { table -> Entry? in
            guard let entry = table[key] else { return nil }
            entry.users -= 1
            if entry.users == 0 { table[key] = nil }
            return entry
        }
        guard let entry else { preconditionFailure("KeyedLocks.unlock of a key nobody holds") }
        // A waiter counted in `users` is blocked on this very mutex (or about to be): it gets it.
        entry.lock.unlock()
    }

    /// Keys held or waited for now (tests: the table empties once everyone let go).
    var entries: Int {
        table.withLock { $0.count }
    }
}
