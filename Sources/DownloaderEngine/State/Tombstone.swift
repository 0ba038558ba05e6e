import Foundation

/// A removed download, kept durably so that it never comes back: the state store writes it in
/// the same transaction that deletes the download's row, and a start-up drops any row it names and
/// deletes the files it lists (a crash may have come before they were deleted). Bounded: the
/// newest `Tombstone.limit` are kept.
struct Tombstone: Sendable, Equatable {
    var id: String
    /// As shown (`shownURL`: signed query parameters named in `coalesceIgnoreQuery` redacted).
    var url: String
    var removedAt: Date
    var by: RemovalCause
    /// Every file the download may have left: its partial, its stored file, a publishing or
    /// placement target.
    var paths: [String]
    /// Cluster mode: the lease of the download's holder, which must still hold for the removal
    /// (the row's deletion and this tombstone) to be written (nil: none). Not stored.
    var fence: LeaseFence? = nil

    static let limit = 10_000
}

/// The engine's tombstones by id, oldest dropped beyond `Tombstone.limit` (as the store does).
struct TombstoneLedger {
    private var byID: [String: Tombstone] = [:]
    private var order: [String] = []
    private var head = 0

    subscript(id: String) -> Tombstone? { byID[id] }

    var count: Int { byID.count }

    /// Whether download `id` was removed (and its tombstone is still kept).
    func contains(id: String) -> Bool { byID[id] != nil }

    /// Forgets the tombstone of `id` (cluster mode: the database refused it, the download lives on).
    mutating func remove(id: String) {
        byID[id] = nil
    }

    mutating func add(_ tombstone: Tombstone) {
        if byID.updateValue(tombstone, forKey: tombstone.id) == nil { order.append(tombstone.id) }
        while byID.count > Tombstone.limit, head < order.count {
            byID[order[head]] = nil
            head += 1
        }
        if head > 1024 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
