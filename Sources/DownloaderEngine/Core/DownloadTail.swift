import Foundation

/// The shared view of one download that its streaming readers follow (`TailState`), and who to
/// tell when it changes. Its own lock; watchers are called without it (never under the engine's
/// lock: the engine updates the tail from its effects).
final class DownloadTail: @unchecked Sendable {
    private let lock = NSLock()
    private var state: TailState
    private var watchers: [UInt64: @Sendable () -> Void] = [:]
    private var nextWatcher: UInt64 = 0

    init(_ state: TailState) {
        self.state = state
    }

    var current: TailState { lock.withLock { state } }

    /// `onChange` is called (on the engine's threads, quickly: wake something) after each change.
    func watch(_ onChange: @escaping @Sendable () -> Void) -> UInt64 {
        lock.withLock {
            nextWatcher += 1
            watchers[nextWatcher] = onChange
            return nextWatcher
        }
    }

    func unwatch(_ id: UInt64) {
        _ = lock.withLock { watchers.removeValue(forKey: id) }
    }

    /// Applies `change` and tells the watchers when the state differs.
    func update(_ change: (inout TailState) -> Void) {
        let toTell: [@Sendable () -> Void] = lock.withLock {
            let before = state
            change(&state)
            return state == before ? [] : Array(watchers.values)
        }
        for watcher in toTell { watcher() }
    }
}
