/// The first `limit` items of a list in `ListPosition` order (newest first), offered in any order:
/// what a page of `GET /downloads` needs without sorting, or making a snapshot of, every download.
/// Pure; an offer costs a comparison when it falls outside, a binary search and an insertion of at
/// most `limit` entries when it falls inside.
struct ListTop<Item> {
    let limit: Int
    /// Kept in list order: `entries[0]` comes first.
    private(set) var entries: [(position: ListPosition, item: Item)] = []

    init(limit: Int) {
        self.limit = max(0, limit)
        entries.reserveCapacity(min(self.limit, 4_096))
    }

    var items: [Item] { entries.map(\.item) }

    mutating func offer(_ position: ListPosition, _ item: Item) {
        if entries.count == limit {
            guard let last = entries.last, position.precedes(last.position) else { return }
            entries.removeLast()
        }
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].position.precedes(position) { low = middle + 1 } else { high = middle }
        }
        entries.insert((position, item), at: low)
    }
}
