import Foundation

/// A place in the list of downloads (`DownloadEngine.list`), newest first: by creation time in
/// microseconds, then by id, both descending. A page of the list ends at one, and the next page
/// begins after it.
public struct ListPosition: Sendable, Equatable {
    public var micros: Int64
    public var id: String

    public init(micros: Int64, id: String) {
        self.micros = micros
        self.id = id
    }

    public init(_ snapshot: DownloadSnapshot) {
        self.init(micros: Self.micros(snapshot.createdAt), id: snapshot.id)
    }

    /// Whether `self` comes before `other` in the list (newer, or as new with a greater id).
    public func precedes(_ other: ListPosition) -> Bool {
        micros != other.micros ? micros > other.micros : id > other.id
    }

    /// Microseconds since 1970, clamped (a creation time read from a damaged store never traps).
    public static func micros(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1_000_000).rounded(.down)
        guard value.isFinite else { return 0 }
        return value >= 9.2e18 ? Int64.max : value <= -9.2e18 ? Int64.min : Int64(value)
    }
}
