import Foundation
import Synchronization

/// The shared view of one download that its streaming readers follow (`TailState`), and who to
/// tell when it changes. Its own lock; watchers are called without it, never under the engine's
/// lock and never on the thread that changed the state: on `teller`, once per burst of changes.
///
/// Bytes landing (`TailChange.moreBytes`) are told only to the watchers that asked for them
/// since they were last told (`awaitMoreBytes`: a reader that sent every byte there was); every
/// other change is told to all. Why: the bytes' arrival is told from the partial file's write
/// lane, and with 1 000 `/fetch` readers, telling all of them every batch took about 60 % of the
/// lane's time (`perf`, one unthrottled 256 MiB fetch), time the fetch then waited for, although
/// most readers were behind their clients and had nothing to do with the news.
final class DownloadTail: @unchecked Sendable {
    private let lock = NSLock()
    private let teller: DispatchQueue
    private var state: TailState
    private var watchers: [UInt64: @Sendable () -> Void] = [:]
    private var nextWatcher: UInt64 = 0
    /// Watchers to tell of the next bytes (each asked once since it was last told).
    private var awaitingBytes: Set<UInt64> = []
    /// What the tell queued on `teller` (and not yet begun) will say; later changes join it.
    private var queuedTell: TailChange?
    /// `TailLiveness`, never told (readers look at it when their patience is tried).
    private let landings = Atomic<UInt64>(0)
    private let finishing = Atomic<Bool>(false)

    /// `teller`: a serial queue the watchers are called on.
    init(_ state: TailState, teller: DispatchQueue) {
        self.state = state
        self.teller = teller
    }

    var current: TailState { lock.withLock { state } }

    var liveness: TailLiveness {
        TailLiveness(landings: landings.load(ordering: .relaxed), finishing: finishing.load(ordering: .relaxed))
    }

    /// Bytes landed on one of the download's connections.
    func noteLanding() { landings.add(1, ordering: .relaxed) }

    /// The attempt's transfer ended and it is being finished (true), or it settled (false).
    func setFinishing(_ on: Bool) { finishing.store(on, ordering: .relaxed) }

    /// `onChange` is called (on the teller's queue, quickly: wake something) after changes other
    /// than more bytes, and after more bytes when it asked for them (`awaitMoreBytes`).
    func watch(_ onChange: @escaping @Sendable () -> Void) -> UInt64 {
        lock.withLock {
            nextWatcher += 1
            watchers[nextWatcher] = onChange
            return nextWatcher
        }
    }

    func unwatch(_ id: UInt64) {
        lock.withLock {
            watchers[id] = nil
            awaitingBytes.remove(id)
        }
    }

    /// Watcher `id` is told when the next bytes land (once). The caller looks at `current` again
    /// afterwards: bytes that landed before it asked are not told.
    func awaitMoreBytes(_ id: UInt64) {
        lock.withLock {
            if watchers[id] != nil { awaitingBytes.insert(id) }
        }
    }

    /// Applies `change`; when the state differs, the watchers it concerns are told (by the tell
    /// already queued, if any: it will say this change too).
    func update(_ change: (inout TailState) -> Void) {
        let queueTell: Bool = lock.withLock {
            let before = state
            change(&state)
            guard state != before else { return false }
            let kind = TailChange(from: before, to: state)
            if let queued = queuedTell {
                queuedTell = queued.merged(with: kind)
                return false
            }
            guard kind == .moreBytes ? !awaitingBytes.isEmpty : !watchers.isEmpty else { return false }
            queuedTell = kind
            return true
        }
        if queueTell { teller.async { self.tell() } }
    }

    /// On `teller`: whom to tell is settled (and later changes queue a tell of their own) before any is called.
    private func tell() {
        let toTell: [@Sendable () -> Void] = lock.withLock {
            let kind = queuedTell ?? .other
            queuedTell = nil
            let told = kind == .other ? Array(watchers.values) : awaitingBytes.compactMap { watchers[$0] }
            awaitingBytes.removeAll(keepingCapacity: true)
            return told
        }
        for watcher in toTell { watcher() }
    }
}
