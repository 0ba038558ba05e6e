/// How a reservation under `--max-downloads-per-client` decides (`ClientTokenStore.reserve`, under
/// the client's advisory lock; pure). The client's rows in `client_tokens` are counted first, rows
/// that no longer count (dead tokens past the `recent` window) included: that count is never below
/// the places the client really holds, so when it is under the limit the place is given without
/// pruning anything (the verdict the exact count would give), and only a client at or over its
/// limit pays for deleting the dead rows (a probe of `tokens` per old row) and counting again.
/// Before, every reservation pruned first: its cost grew with the client's rows, serialised by the
/// lock (one address posting with 8 connections: 38–44 POSTs/s against 600–780 without a limit).
public enum ClientReservation: Sendable, Equatable {
    /// Insert the place: the client is under its limit.
    case insert
    /// Delete the client's dead rows, then count again.
    case prune
    /// The client holds `limit` places already.
    case refuse

    /// The next step, given the client's `rows` as counted and whether they were pruned already.
    public static func step(rows: Int, limit: Int, pruned: Bool) -> ClientReservation {
        if rows < limit { return .insert }
        return pruned ? .refuse : .prune
    }
}
