/// When a ranged fetch's body bytes go to the file: pure decisions from the bytes held, the bytes
/// arriving and how long the oldest held byte has waited. libcurl hands a body over in pieces of at
/// most 16 KiB (`CURL_MAX_WRITE_SIZE`), whatever its receive buffer; one pwrite(2) each cost a
/// segmented fetch most of its CPU (measured on a capped origin: 64 000 pwrites and 32 000 futex
/// calls per GiB, the kernel's per-call work on partial pages more than the copy itself), so the
/// bytes are gathered into a buffer of `capacity` and written (and counted, and checkpointed) a
/// buffer at a time. A slow connection's bytes wait at most `maxHold` seconds, so progress, the
/// contiguous prefix and the checkpoints keep moving.
struct WriteBatching: Equatable, Sendable {
    /// Gathered bytes per fetch (a few buffers per download: bounded).
    static let defaultCapacity = 1 << 20
    /// Held bytes are written once the oldest waited this long.
    static let defaultMaxHold = 0.2

    let capacity: Int
    let maxHold: Double

    init(capacity: Int = Self.defaultCapacity, maxHold: Double = Self.defaultMaxHold) {
        self.capacity = max(1, capacity)
        self.maxHold = max(0, maxHold)
    }

    /// What to do with `incoming` bytes while `held` are gathered, the oldest for `heldFor` seconds:
    /// gather the first `gather` of them (as many as fit), then write the buffer when `flush`; the
    /// caller asks again for the rest. So every write but a piece's last (or a slow connection's)
    /// is exactly `capacity` bytes at a multiple of `capacity` from the piece's start: whole pages,
    /// no partial page to zero (handed to the kernel in calls of `PageCacheWrites.maxBytes`).
    /// A `maxHold` of 0 writes every piece as it comes. `room`: what the buffer holds this time
    /// when less than `capacity` (`SegmentFetch`: its first bytes left unused, so that the gathered
    /// bytes sit at their offset's place in a block, `DirectIO`).
    struct Plan: Equatable, Sendable {
        var gather: Int
        var flush: Bool
    }

    func plan(held: Int, incoming: Int, heldFor: Double, room: Int? = nil) -> Plan {
        let room = max(1, min(capacity, room ?? capacity))
        let gather = max(0, min(incoming, room - held))
        // The oldest byte once these are gathered: a held one, or one arriving now.
        let oldest = held > 0 ? heldFor : 0
        return Plan(gather: gather, flush: held + gather >= room || oldest >= maxHold)
    }
}
