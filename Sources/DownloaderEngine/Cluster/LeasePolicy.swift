/// What a replica knows of a lease it holds on one coalescing key: the epoch the database granted,
/// and when (on the replica's monotonic clock) its last successful renewal started. The local
/// deadline, `renewedAt + ttl`, is never later than the database's `expires_at` (set by that renewal,
/// after it started), so a replica that obeys it never writes after another one may have taken over.
struct HeldLease: Sendable, Equatable {
    let key: String
    let epoch: Int64
    /// Monotonic seconds at which the last successful renewal (or the acquisition) started.
    var renewedAt: Double
}

/// The lease rules, pure (the clock is an argument): when to renew, when to stop the transfer, when
/// writing is still allowed, when to look for lapsed leases. A transfer keeps its lease only while
/// renewals succeed: a refused renewal (another epoch holds the key) or a failed one (the database
/// is unreachable) stops it at once, and so does finding the local deadline passed (after a `SIGSTOP`,
/// a long pause, a clock jump); the process carries on as an ordinary replica.
struct LeasePolicy: Sendable, Equatable {
    /// `--lease-ttl` in seconds (≥ 1).
    let ttl: Double

    /// Renewals, and the searches for lapsed leases, happen this often: TTL/3.
    var interval: Double { ttl / 3 }

    enum Decision: Sendable, Equatable {
        /// Nothing to do before `at`.
        case wait(until: Double)
        /// Renew now.
        case renew
        /// Stop the transfer and write nothing more (the lease is lost or may be).
        case stop(StopReason)
    }

    enum StopReason: String, Sendable, Equatable {
        /// The local deadline passed before a renewal succeeded (the process was paused, or slow).
        case deadlinePassed = "deadline_passed"
        /// The database refused the renewal: another replica holds the key with a higher epoch.
        case refused
        /// The renewal could not reach the database.
        case unreachable
    }

    /// How a renewal that started at some time ended.
    enum RenewalOutcome: Sendable, Equatable {
        case renewed
        case refused
        case failed
    }

    /// The local deadline: no write of any kind once it has passed.
    func deadline(_ lease: HeldLease) -> Double { lease.renewedAt + ttl }

    /// Whether the holder may still write (rows or files) at `now`.
    func mayWrite(_ lease: HeldLease, now: Double) -> Bool { now < deadline(lease) }

    /// What the holder does at `now`.
    func decide(_ lease: HeldLease, now: Double) -> Decision {
        if !mayWrite(lease, now: now) { return .stop(.deadlinePassed) }
        let due = lease.renewedAt + interval
        return now >= due ? .renew : .wait(until: due)
    }

    /// The lease after a renewal that started at `startedAt` ended with `outcome` at `now`, and what to do.
    /// A success counts from its start (the database's new expiry is later than that).
    func renewed(_ lease: HeldLease, startedAt: Double, outcome: RenewalOutcome, now: Double) -> (HeldLease, Decision) {
        switch outcome {
        case .refused: return (lease, .stop(.refused))
        case .failed: return (lease, .stop(mayWrite(lease, now: now) ? .unreachable : .deadlinePassed))
        case .renewed:
            var next = lease
            next.renewedAt = max(lease.renewedAt, startedAt)
            return (next, decide(next, now: now))
        }
    }

    /// Whether the search for lapsed leases is due at `now`, the last one having run at `last` (nil: never).
    func scanDue(last: Double?, now: Double) -> Bool {
        guard let last else { return true }
        return now - last >= interval
    }
}
