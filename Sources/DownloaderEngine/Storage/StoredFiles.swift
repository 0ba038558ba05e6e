import Basics

/// The cache and data areas as listed at start-up (`AreaListing`): whether the file a stored
/// download names exists. A path in one of the areas is answered from its listing (and claimed, so
/// that the orphan sweep keeps it); any other path is `stat`ed.
struct StoredFiles {
    var cache: AreaListing
    var data: AreaListing
    /// The areas' directories as files (`stat`), once asked (`spelledInArea`).
    private var areas: (cache: FileIdentity?, data: FileIdentity?)?
    /// Other directories stored paths lie in, as files (a few: the areas' earlier names), at most
    /// `maxRemembered` of them.
    private var directories: [String: FileIdentity] = [:]
    static let maxRemembered = 64

    init(cache: AreaListing, data: AreaListing) {
        self.cache = cache
        self.data = data
    }

    /// Why an area could not be listed: nothing can be told of its files.
    var failure: SystemError? { cache.failure ?? data.failure }

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

    /// `path` spelled with its area's directory when it lies directly in an area's directory under
    /// another name (a symlink, a bind mount, the directory given another way since), else nil. Such
    /// a path is not in the listings, whose files it names: unclaimed, the cache's would be swept,
    /// and a data file "placed" into its own area would be unlinked as its old name.
    mutating func spelledInArea(_ path: String) -> String? {
        guard let slash = path.lastIndex(of: "/"), slash > path.startIndex else { return nil }
        let (parent, name) = (String(path[..<slash]), path[path.index(after: slash)...])
        guard !name.isEmpty, parent != cache.directory, parent != data.directory, let identity = identity(of: parent) else { return nil }
        if areas == nil { areas = (FileIdentity(directory: cache.directory), FileIdentity(directory: data.directory)) }
        if identity == areas?.cache { return cache.directory + "/" + name }
        if identity == areas?.data { return data.directory + "/" + name }
        return nil
    }

    private mutating func identity(of directory: String) -> FileIdentity? {
        if let known = directories[directory] { return known }
        let identity = FileIdentity(directory: directory)
        if let identity, directories.count < Self.maxRemembered { directories[directory] = identity }
        return identity
    }
}
