import Foundation

/// Cluster mode: which replica runs the purges. The one holding the `janitor` lease row (the same
/// `leases` table and rules as a download's: acquired when nobody holds it or it expired on the
/// database's clock, renewed every TTL/3, lost at once on a refused or failed renewal or a passed
/// local deadline) sweeps the whole database (`JanitorPlan`, `EngineCore+Janitor`); every other
/// replica tries to take the lease at each turn (at most TTL/6 apart), so a dead janitor's lease is
/// taken within TTL + TTL/6 plus a round trip. At shutdown it is released (another replica takes it
/// at its next turn). The takeover search for lapsed download leases leaves this row alone.
final class ClusterJanitor: @unchecked Sendable {
    /// The lease row's key: never a download's (those are normalised URLs, `CoalescingKey.leaseName`).
    static let leaseKey = "janitor"

    let policy: LeasePolicy
    let leases: LeaseStore
    let store: JanitorStore
    let replica: ClusterReplica
    /// Turns run here, one at a time (off the engine's lock and the lease keeper's thread).
    let queue = DispatchQueue(label: "download-engine.janitor")
    private let monotonic: @Sendable () -> Double
    private let lock = NSLock()
    // Guarded by `lock`.
    private var hold: LeaseHold?
    private var lastSweep: Double?
    private var lastOrphanSweep: Double?
    private var stopped = false

    init(leases: LeaseStore, replica: ClusterReplica, monotonic: @escaping @Sendable () -> Double) {
        policy = LeasePolicy(ttl: replica.leaseTTL)
        self.leases = leases
        store = JanitorStore(pool: leases.pool)
        self.replica = replica
        self.monotonic = monotonic
    }

    /// How often turns run: half the renewal interval (a renewal is due every TTL/3, so it happens
    /// in time), and at least as often as the sweeps are due.
    func turn(sweepInterval: Double) -> Double { max(0.1, min(policy.interval / 2, sweepInterval)) }

    /// One turn (janitor queue): keeps the lease (renews it when due, lets it go when lost) or tries
    /// to take it. Returns the hold while this replica is the janitor.
    func keep() -> LeaseHold? {
        let current: LeaseHold? = lock.withLock { stopped ? nil : hold }
        if let current, !current.isStopped {
            switch policy.decide(current.lease, now: monotonic()) {
            case .wait: return current
            case .stop: lose(current)
            case .renew:
                let (next, decision) = leases.renewal(of: current, policy: policy, monotonic: monotonic)
                if case .stop = decision {
                    lose(current)
                    return nil
                }
                current.update(next)
                return current
            }
        }
        guard lock.withLock({ !stopped }) else { return nil }
        let started = monotonic()
        guard let grant = try? leases.acquire(key: Self.leaseKey, owner: replica.owner, ownerURL: replica.advertiseURL,
                                              ttl: policy.ttl) else { return nil }
        let taken = LeaseHold(key: Self.leaseKey, epoch: grant.epoch, acquiredAt: started, ttl: policy.ttl)
        lock.withLock { hold = taken }
        return taken
    }

    private func lose(_ lost: LeaseHold) {
        lost.stop()
        lock.withLock { if hold === lost { hold = nil } }
    }

    /// Whether this replica is the janitor now (holds the lease within its local deadline).
    var isJanitor: Bool {
        guard let hold = lock.withLock({ hold }) else { return false }
        return hold.mayWrite(now: monotonic())
    }

    /// Whether a sweep is due at `now` (every `interval`); when it is, it counts as started.
    func sweepDue(interval: Double) -> Bool {
        let now = monotonic()
        return lock.withLock { Self.due(&lastSweep, now: now, interval: interval) }
    }

    /// Whether a sweep of orphan files (`OrphanSweep`) is due (every `interval`; the first at once).
    func orphanSweepDue(interval: Double) -> Bool {
        let now = monotonic()
        return lock.withLock { Self.due(&lastOrphanSweep, now: now, interval: interval) }
    }

    private static func due(_ last: inout Double?, now: Double, interval: Double) -> Bool {
        if let last, now - last < interval { return false }
        last = now
        return true
    }

    /// The engine stops: no more turns, and the lease is released so another replica takes it at once.
    func stop() {
        let held: LeaseHold? = lock.withLock {
            stopped = true
            defer { hold = nil }
            return hold
        }
        if let held, held.stop() { _ = try? leases.release(key: Self.leaseKey, epoch: held.epoch) }
    }

    /// Test seam: turns stop and the lease is neither renewed nor released (as if the process froze or died).
    func abandonForTests() {
        lock.withLock {
            stopped = true
            hold?.stop()
            hold = nil
        }
    }
}
