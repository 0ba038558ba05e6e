/// The names each lease epoch writes under, so that two epochs never write the same file: a replica
/// that wakes after losing its lease can at worst add bytes to its own, abandoned partial. The row of
/// the lease names the partial in use; a completed file gets an epoch-specific name too and becomes
/// visible only through the fenced row update that records it.
enum EpochFiles {
    /// `<id>.<epoch>.part`.
    static func partial(id: String, epoch: Int64) -> String { "\(id).\(epoch).part" }

    /// The completed file's name: `<id>.<epoch>-<name>` (or `<id>.<epoch>` without a name).
    static func completed(id: String, epoch: Int64, name: String?) -> String {
        name.map { "\(id).\(epoch)-\($0)" } ?? "\(id).\(epoch)"
    }

    /// The epoch in a partial's file name of download `id`, or nil for any other name.
    static func epoch(ofPartial name: String, id: String) -> Int64? {
        guard name.hasPrefix(id + "."), name.hasSuffix(".part") else { return nil }
        let middle = name.dropFirst(id.count + 1).dropLast(5)
        guard !middle.isEmpty, middle.allSatisfy(\.isNumber), let epoch = Int64(middle), epoch > 0 else { return nil }
        return epoch
    }

    /// How a new epoch's partial starts: from nothing, or with the first `length` bytes of the
    /// previous epoch's file (the durable offset the database recorded; bytes past it may never have
    /// reached stable storage, or may belong to a writer that was fenced).
    enum Seed: Sendable, Equatable {
        case empty
        case copy(from: String, length: Int64)
    }

    /// The seed of a new epoch, given what the lease row recorded.
    static func seed(previousPartial: String?, durableOffset: Int64) -> Seed {
        guard let previousPartial, durableOffset > 0 else { return .empty }
        return .copy(from: previousPartial, length: durableOffset)
    }
}
