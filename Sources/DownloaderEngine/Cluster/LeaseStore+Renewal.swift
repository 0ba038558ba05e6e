extension LeaseStore {
    /// Renews `hold` now (a database round trip) and says, by `policy`, what follows: the lease as
    /// renewed and whether to carry on or stop. A failed round trip counts as `.failed`.
    func renewal(of hold: LeaseHold, policy: LeasePolicy, monotonic: () -> Double) -> (HeldLease, LeasePolicy.Decision) {
        let started = monotonic()
        let outcome: LeasePolicy.RenewalOutcome
        do throws(StateStoreError) {
            outcome = try renew(key: hold.key, epoch: hold.epoch, ttl: policy.ttl) ? .renewed : .refused
        } catch {
            outcome = .failed
        }
        return policy.renewed(hold.lease, startedAt: started, outcome: outcome, now: monotonic())
    }

    /// Renews `holds` in statements of at most `batch` leases each and says, by `policy`, what
    /// follows for each: a lease the statement did not renew was refused. A statement the database
    /// refused (a deadlock with a commit locking the same rows in another order, which PostgreSQL
    /// ends by failing one of them) is tried lease by lease before any lease counts as failed. One
    /// that failed because the database could not be reached counts as failed for every lease of
    /// it at once: lease by lease, each would wait out the same connect or statement deadline, and
    /// the keeper's thread would be held for minutes (no scans, no heartbeats meanwhile).
    func renewals(of holds: [LeaseHold], policy: LeasePolicy, monotonic: () -> Double,
                  batch: Int = 1_000) -> [(hold: LeaseHold, lease: HeldLease, decision: LeasePolicy.Decision)] {
        var out: [(hold: LeaseHold, lease: HeldLease, decision: LeasePolicy.Decision)] = []
        out.reserveCapacity(holds.count)
        for start in stride(from: 0, to: holds.count, by: max(1, batch)) {
            // In key order: two batches (or a batch and a commit doing the same) lock rows alike.
            let chunk = holds[start..<min(holds.count, start + max(1, batch))].sorted { $0.key < $1.key }
            let started = monotonic()
            let outcome: ((LeaseHold) -> LeasePolicy.RenewalOutcome)?
            do throws(StateStoreError) {
                let renewed = try renew(chunk.map { (key: $0.key, epoch: $0.epoch) }, ttl: policy.ttl)
                outcome = { renewed.contains($0.key) ? .renewed : .refused }
            } catch {
                outcome = pool.reachable ? nil : { _ in .failed }
            }
            guard let outcome else {  // Refused by the database: lease by lease.
                for hold in chunk {
                    let (lease, decision) = renewal(of: hold, policy: policy, monotonic: monotonic)
                    out.append((hold, lease, decision))
                }
                continue
            }
            let now = monotonic()
            for hold in chunk {
                let (lease, decision) = policy.renewed(hold.lease, startedAt: started, outcome: outcome(hold), now: now)
                out.append((hold, lease, decision))
            }
        }
        return out
    }
}
