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
}
