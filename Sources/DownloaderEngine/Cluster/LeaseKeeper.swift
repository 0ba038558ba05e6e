import Foundation
import Glibc
import Synchronization

/// Keeps this replica's leases, on a thread of its own: renews each one every TTL/3 (`LeasePolicy`;
/// those due together in one statement),
/// and stops it (`onStop`) when a renewal is refused or fails or its local deadline passed, so its
/// transfer stops at once and nothing more is written under it. Also runs the search for lapsed
/// leases (`onScan`) every TTL/3, and at its next turn after another replica handed leases over
/// (`searchSoon`). Renewals and searches are database round trips: the engine's lock
/// is never held across them.
final class LeaseKeeper: @unchecked Sendable {
    let policy: LeasePolicy
    private let store: LeaseStore
    private let monotonic: @Sendable () -> Double
    private let holds = Mutex<[String: LeaseHold]>([:])
    private let running = Atomic<Bool>(true)
    /// Test seam: renewals and searches are skipped, as for a process paused (`SIGSTOP`, a long GC)
    /// while its writers carry on: the local deadline still passes, and stops the leases.
    let paused = Atomic<Bool>(false)
    /// Told (on the keeper's thread) when a lease stops; the hold is already stopped and dropped.
    var onStop: (@Sendable (LeaseHold, LeasePolicy.StopReason) -> Void)?
    /// Told (on the keeper's thread) when the search for lapsed leases is due.
    var onScan: (@Sendable () -> Void)?
    /// Told (on the keeper's thread) every `beatInterval` while leases are kept: the holder writes
    /// its downloads' heartbeats (`Heartbeat`), so that every replica's snapshots agree within a second.
    var onBeat: (@Sendable ([LeaseHold]) -> Void)?
    /// Set when another replica handed leases over (`HandOverWatch`): the search runs at the next turn.
    let searchSoon = Atomic<Bool>(false)
    /// Heartbeats are written this often: twice a second.
    static let beatInterval = 0.5

    init(policy: LeasePolicy, store: LeaseStore, monotonic: @escaping @Sendable () -> Double) {
        self.policy = policy
        self.store = store
        self.monotonic = monotonic
    }

    /// Starts the thread (once `onStop` and `onScan` are set).
    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "download-engine.leases"
        thread.start()
    }

    /// Ends the thread (at its next turn); the leases are no longer renewed.
    func stop() { running.store(false, ordering: .releasing) }

    func add(_ hold: LeaseHold) { holds.withLock { $0[hold.key] = hold } }

    /// Stops renewing `hold` (released, handed over or evicted).
    func remove(_ hold: LeaseHold) {
        holds.withLock { if $0[hold.key] === hold { $0[hold.key] = nil } }
    }

    var count: Int { holds.withLock { $0.count } }

    /// Every lease kept now.
    var all: [LeaseHold] { holds.withLock { Array($0.values) } }

    /// How long the thread sleeps between turns: a quarter of the renewal interval, within 20–250 ms.
    var turn: Double { min(0.25, max(0.02, policy.interval / 4)) }

    private func run() {
        var lastScan: Double?
        var lastBeat = -Double.infinity
        while running.load(ordering: .acquiring) {
            let kept = all
            let due = kept.filter(dueForRenewal)
            if !due.isEmpty && !paused.load(ordering: .acquiring) {
                // One round trip for all of them: one per lease fell behind the deadlines with a
                // few thousand (queued downloads hold leases too).
                for renewal in store.renewals(of: due, policy: policy, monotonic: monotonic) {
                    if case .stop(let reason) = renewal.decision {
                        stopped(renewal.hold, reason)
                    } else {
                        renewal.hold.update(renewal.lease)
                    }
                }
            }
            let now = monotonic()
            if !paused.load(ordering: .acquiring), now - lastBeat >= Self.beatInterval {
                lastBeat = now
                let writable = kept.filter { $0.mayWrite(now: now) }
                if !writable.isEmpty { onBeat?(writable) }
            }
            if policy.scanDue(last: lastScan, now: now) || searchSoon.load(ordering: .acquiring), !paused.load(ordering: .acquiring) {
                searchSoon.store(false, ordering: .releasing)
                lastScan = now
                onScan?()
            }
            usleep(useconds_t(turn * 1_000_000))  // The keeper's period (a dedicated thread).
        }
    }

    /// Whether `hold` is to be renewed now; one that stopped or whose deadline passed is dropped
    /// (and told) here.
    private func dueForRenewal(_ hold: LeaseHold) -> Bool {
        guard !hold.isStopped else {
            remove(hold)
            return false
        }
        switch policy.decide(hold.lease, now: monotonic()) {
        case .wait: return false
        case .stop(let reason):
            stopped(hold, reason)
            return false
        case .renew: return true
        }
    }

    private func stopped(_ hold: LeaseHold, _ reason: LeasePolicy.StopReason) {
        remove(hold)
        guard hold.stop() else { return }
        onStop?(hold, reason)
    }
}
