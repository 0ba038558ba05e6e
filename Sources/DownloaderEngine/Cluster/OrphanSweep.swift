/// Cluster mode's sweep of the shared partial and cache areas (pure): which files the janitor
/// deletes because no row names them any more. The single process does this at start-up against its
/// own rows; in a cluster the database says what is in use, and a file some replica is about to name
/// (its row not committed yet) must never go, so only files whose status (`ctime`: a write, a rename
/// into place) is older than a safe age are deleted, except those of a tombstoned id (it never comes
/// back: the remover deletes them itself and a crash may have come first). The data area is never
/// touched (as in the single process), nor any file not named like ours.
///
/// In the partial area a file `<id>.<epoch>.part` is an orphan when no row has that id, or when its
/// epoch is older than the download's lease's and the lease row does not name it (a takeover's seed
/// is read from the file the lease names; the current epoch's is being written). In the cache area a
/// file `<id>.<epoch>…` is an orphan when no row has that id or the row names another file. A set
/// aside file (`….trash`: a deletion a crash interrupted) is one too. In the data area only a
/// tombstoned id's files go, and copies a crash cut short (`….tmp-copy`: a move across
/// filesystems; a copy still being written changes its status, so it is never old).
enum OrphanSweep {
    enum Area: Sendable, Equatable {
        case partial
        case cache
        /// Only a tombstoned id's files go here.
        case data
    }

    /// What the database says of one download: the file name its row names as completed (in the
    /// cache area, or in the data area; nil when none there), and its lease's epoch and partial.
    struct Row: Sendable, Equatable {
        var cacheFile: String?
        var leaseEpoch: Int64?
        var partFile: String?
        var dataFile: String?

        init(cacheFile: String? = nil, leaseEpoch: Int64? = nil, partFile: String? = nil, dataFile: String? = nil) {
            self.cacheFile = cacheFile
            self.leaseEpoch = leaseEpoch
            self.partFile = partFile
            self.dataFile = dataFile
        }
    }

    enum Verdict: Sendable, Equatable {
        case keep
        /// A tombstoned id's file: deleted whatever its age.
        case delete
        /// Deleted only when its status changed at least the safe age ago.
        case deleteIfOld
    }

    /// The verdict on file `name` of `area`, given the rows by id and the tombstoned ids.
    static func verdict(_ name: String, in area: Area, rows: [String: Row], tombstoned: Set<String>) -> Verdict {
        // The file a row names stays whatever its name ends with (an origin's `x.tmp-copy` or `y.trash`).
        if let id = parse(name, area)?.id, !tombstoned.contains(id), let row = rows[id],
           name == (area == .data ? row.dataFile : area == .cache ? row.cacheFile : nil) {
            return .keep
        }
        if area == .data {
            if name.hasSuffix(FileStore.copySuffix) { return isOurs(name) ? .deleteIfOld : .keep }
            return parse(name, area).map { tombstoned.contains($0.id) } == true ? .delete : .keep
        }
        if name.hasSuffix(FileStore.trashSuffix) { return isOurs(name) ? .deleteIfOld : .keep }
        guard let (id, epoch) = parse(name, area) else { return .keep }
        if tombstoned.contains(id) { return .delete }
        guard let row = rows[id] else { return .deleteIfOld }
        switch area {
        case .data:
            return .keep
        case .partial:
            guard let leaseEpoch = row.leaseEpoch, epoch < leaseEpoch, name != row.partFile else { return .keep }
            return .deleteIfOld
        case .cache:
            return name == row.cacheFile ? .keep : .deleteIfOld
        }
    }

    /// The id and epoch in a name we write: `<16 hex id>.<epoch>.part` in the partial area,
    /// `<16 hex id>.<epoch>` or `<16 hex id>.<epoch>-<name>` in the cache area.
    static func parse(_ name: String, _ area: Area) -> (id: String, epoch: Int64)? {
        let bytes = Array(name.utf8)
        guard bytes.count > 17, bytes[16] == UInt8(ascii: "."), AreaListing.id(hex: bytes[..<16]) != nil else { return nil }
        var rest = bytes[17...]
        switch area {
        case .partial:
            guard rest.count > 5, rest.suffix(5).elementsEqual(".part".utf8) else { return nil }
            rest = rest.dropLast(5)
        case .cache, .data:
            if let dash = rest.firstIndex(of: UInt8(ascii: "-")) { rest = rest[..<dash] }
        }
        guard !rest.isEmpty, rest.count <= 18, rest.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let epoch = Int64(String(decoding: rest, as: UTF8.self)), epoch > 0 else { return nil }
        return (String(decoding: bytes[..<16], as: UTF8.self), epoch)
    }

    /// A set-aside name starting with one of our ids and an epoch (`<id>.<epoch>….trash`).
    private static func isOurs(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count > 18, bytes[16] == UInt8(ascii: "."), AreaListing.id(hex: bytes[..<16]) != nil else { return false }
        return bytes[17] >= UInt8(ascii: "0") && bytes[17] <= UInt8(ascii: "9")
    }
}
