import Basics
import Glibc

/// The files of one storage area named like ours (`<16 hex id>-<name>`, see `FileStore.finalPath`),
/// read in one `readdir` pass into one buffer and indexed by the id's 64 bits: start-up checks that
/// tens of thousands of stored files exist, and finds the orphans, without a `stat`, a string hash
/// or an allocation per file. Regular files only (`d_type`; an `lstat` where the file system does
/// not say): a symlink never counts as a stored file.
struct AreaListing {
    let directory: String
    private let directoryBytes: [UInt8]
    private struct Entry {
        var id: UInt64
        var start: Int
        var count: Int
        var regular: Bool
        var claimed = false
    }
    /// Every name, one after the other.
    private var names: [UInt8] = []
    private var entries: [Entry] = []
    /// Id → index in `entries` of its first regular file, and of any further ones (rare: an older
    /// file of the same download under another name).
    private var regular: [UInt64: Int] = [:]
    private var moreRegular: [UInt64: [Int]] = [:]

    /// Why the directory could not be read whole (`opendir`, or `readdir` failing midway); nil when
    /// it was. A listing that failed says nothing of which files exist: start-up stops on it rather
    /// than drop every download whose file it did not list (an area on a mount not yet up, or whose
    /// owner changed, would otherwise lose its records and keep its files unclaimed).
    private(set) var failure: SystemError?

    /// Empty, with `failure` set, when the directory cannot be read.
    init(_ directory: String) {
        self.directory = directory
        directoryBytes = Array(directory.utf8)
        guard let dir = opendir(directory) else {
            failure = SystemError(errno: errno, function: "opendir \(directory)")
            return
        }
        defer { closedir(dir) }
        while true {
            errno = 0  // readdir's end and its failure both return NULL: errno tells them apart.
            guard let entry = readdir(dir) else {
                if errno != 0 { failure = SystemError(errno: errno, function: "readdir \(directory)") }
                break
            }
            let type = Int32(entry.pointee.d_type)
            withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let name = UnsafeRawBufferPointer(rebasing: raw[..<strnlen(raw.baseAddress!.assumingMemoryBound(to: CChar.self), raw.count)])
                guard name.count > 17, name[16] == UInt8(ascii: "-"), let id = Self.id(hex: name[..<16]) else { return }
                var isRegular = type == DT_REG
                if type == DT_UNKNOWN { isRegular = FileStore.fileSize(directory + "/" + String(decoding: name, as: UTF8.self)) != nil }
                entries.append(Entry(id: id, start: names.count, count: name.count, regular: isRegular))
                names.append(contentsOf: name)
                guard isRegular else { return }
                if regular[id] == nil { regular[id] = entries.count - 1 } else { moreRegular[id, default: []].append(entries.count - 1) }
            }
        }
    }

    /// The 64 bits of a download id: exactly 16 lower-case hex digits, else nil.
    static func id<Bytes: Collection<UInt8>>(hex bytes: Bytes) -> UInt64? {
        guard bytes.count == 16 else { return nil }
        var id: UInt64 = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): id = id << 4 | UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): id = id << 4 | UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        return id
    }

    /// Where `path`, the file of download `id`, stands in this listing.
    enum Lookup: Equatable {
        /// `path` does not lie in this directory: the listing cannot tell.
        case elsewhere
        /// In this directory, but not a regular file named so.
        case absent
        /// The regular file at this index of the listing.
        case listed(Int)
    }

    /// Looks `path` up without claiming it (a pure read: start-up looks files up on another
    /// thread while the records are built, then claims them in order).
    func lookup(_ path: String, of id: String) -> Lookup {
        var path = path
        var id = id
        guard let bits = id.withUTF8({ Self.id(hex: $0) }) else { return path.hasPrefix(directory + "/") ? .absent : .elsewhere }
        return path.withUTF8 { bytes -> Lookup in
            let dir = directoryBytes.count
            guard bytes.count > dir + 1, bytes[dir] == UInt8(ascii: "/"),
                  memcmp(bytes.baseAddress!, directoryBytes, dir) == 0 else { return .elsewhere }
            let name = UnsafeBufferPointer(rebasing: bytes[(dir + 1)...])
            guard !name.contains(UInt8(ascii: "/")) else { return .elsewhere }
            guard let first = regular[bits] else { return .absent }
            if isNamed(first, name) { return .listed(first) }
            for index in moreRegular[bits] ?? [] where isNamed(index, name) { return .listed(index) }
            return .absent
        }
    }

    /// Whether `path`, the file of download `id`, is a regular file, answered from the listing when
    /// `path` lies in this directory (else nil). A file found is claimed: `removeUnclaimed` keeps it.
    mutating func claim(_ path: String, of id: String) -> Bool? {
        switch lookup(path, of: id) {
        case .elsewhere: return nil
        case .absent: return false
        case .listed(let index):
            claim(index)
            return true
        }
    }

    /// Claims the file at `index` (from `lookup`).
    mutating func claim(_ index: Int) {
        entries[index].claimed = true
    }

    private func isNamed(_ index: Int, _ name: UnsafeBufferPointer<UInt8>) -> Bool {
        let entry = entries[index]
        return entry.count == name.count
            && names.withUnsafeBufferPointer { memcmp($0.baseAddress! + entry.start, name.baseAddress!, name.count) == 0 }
    }

    /// Deletes every file named like ours that nothing claimed (`endingWith`: only those so named).
    func removeUnclaimed(endingWith suffix: String = "") {
        for entry in entries where !entry.claimed {
            let name = String(decoding: names[entry.start..<entry.start + entry.count], as: UTF8.self)
            if name.hasSuffix(suffix) { FileStore.remove(directory + "/" + name) }
        }
    }
}
