/// The cache and data areas as listed at start-up (`AreaListing`): whether the file a stored
/// download names exists. A path in one of the areas is answered from its listing (and claimed, so
/// that the orphan sweep keeps it); any other path is `stat`ed.
struct StoredFiles {
    var cache: AreaListing
    var data: AreaListing

    /// Where a stored file was found.
    enum Presence: Equatable {
        case absent
        case inCache(Int)
        case inData(Int)
        /// Outside both areas, and a regular file.
        case outside
    }

    /// Looks `path`, the file of download `id`, up without claiming it: a pure read, so start-up
    /// does it on another thread while the records are built, then claims in order (`claim`).
    func presence(of path: String, id: String) -> Presence {
        switch cache.lookup(path, of: id) {
        case .listed(let index): return .inCache(index)
        case .absent: return .absent
        case .elsewhere: break
        }
        switch data.lookup(path, of: id) {
        case .listed(let index): return .inData(index)
        case .absent: return .absent
        case .elsewhere: return FileStore.fileSize(path) != nil ? .outside : .absent
        }
    }

    /// Whether the file found exists; a listed one is claimed.
    mutating func claim(_ presence: Presence) -> Bool {
        switch presence {
        case .absent: return false
        case .outside: return true
        case .inCache(let index): cache.claim(index)
        case .inData(let index): data.claim(index)
        }
        return true
    }

    /// Looks up and claims at once.
    mutating func claim(_ path: String, of id: String) -> Bool {
        claim(presence(of: path, id: id))
    }
}
