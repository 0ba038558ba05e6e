/// The in-memory fast path of cluster mode's `--max-downloads-per-client` (pure): a reservation in
/// the database (`ClientTokenStore`, one transaction under the client's advisory lock, whose commit
/// waits for the WAL flush: one address's requests queue behind each other) claims a block of
/// places at once when the client is far from its limit, and the replica gives the spare ones to
/// that client's next requests without asking the database.
///
/// Never over the limit: every place is a row the limit counts, inserted under the lock only while
/// the client's rows (an upper bound of what it holds) leave room for all of the block; a spare is
/// given only within half of `recent` of the claim's start, so its request commits the caller's
/// token in its place well before the row stops counting (the same bound a single reservation
/// relies on between its reservation and its commit). Near the limit blocks are one place, so the
/// verdicts there are the database's; spares another replica has not used yet may refuse a client
/// early, by at most a quarter of the room it had, for at most `recent` seconds.
enum ClientAllowance {
    /// Places one reservation claims at most.
    static let maximumBlock = 32

    /// Places to claim when the client holds `held` of `limit`: a quarter of the room left, at
    /// most `maximumBlock`, at least one.
    static func block(held: Int, limit: Int) -> Int {
        max(1, min(maximumBlock, (limit - held) / 4))
    }

    /// Whether a spare place claimed (its reservation started) at `claimedAt` may be given at `now`.
    static func usable(claimedAt: Double, now: Double, recent: Double) -> Bool {
        now - claimedAt < recent / 2
    }

    /// Clients with spare places remembered at most (beyond it, new spares are left unused: their
    /// rows stop counting after `recent`).
    static let maximumClients = 4_096
}
