/// The feed's event ids: strictly increasing, also across restarts. Ids are handed out only below
/// `limit`, a value stored durably first (`EventFeed` stores the next limit in the background once
/// half a block is used, or at once when the block ran out); a new run starts above the stored value.
/// Pure.
struct EventIDSequence {
    /// Ids reserved by one stored value.
    let block: UInt64
    private(set) var next: UInt64
    /// Ids below this were reserved (stored) already.
    private(set) var limit: UInt64
    /// A reservation is being stored.
    var reserving = false

    /// After a run that stored `stored` (nil: none): the first id is above it.
    init(stored: UInt64?, block: UInt64 = 1 << 20) {
        self.block = max(2, block)
        next = (stored ?? 0) + 1
        limit = next
    }

    /// The id before this run's first: never handed out in this run.
    var floor: UInt64 { next - 1 }

    var newestIssued: UInt64 { next - 1 }

    /// No id is left below the limit: a reservation must be stored before the next is handed out.
    var exhausted: Bool { next >= limit }

    /// Half the block is used and no reservation is on its way: time to store the next one.
    var wantsReservation: Bool { !reserving && next &+ block / 2 >= limit }

    /// The value to store for the next reservation.
    var nextLimit: UInt64 { max(limit, next) &+ block }

    mutating func reserved(upTo value: UInt64) {
        limit = max(limit, value)
        reserving = false
    }

    mutating func take() -> UInt64 {
        defer { next += 1 }
        return next
    }
}
