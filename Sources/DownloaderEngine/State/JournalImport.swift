import Basics
import Foundation
import Glibc

/// The one-time import of the state file earlier releases kept: `<state dir>/journal.json`,
///
///   {"version": 1, "downloads": [ {"id", "url", "storage", "state", "validator"?: {"etag"?,
///    "lastModified"?}, "expectedTotal"?, "verifiedOffset", "expectedSHA256"?, "expectedSize"?,
///    "fileName"?, "finalPath"?, "sha256"?, "size"?, "createdAt", "updatedAt", "lastAccess" (seconds
///    since 1970), "error"?: {"code", "message", "httpStatus"?}, "tokens"?: ["<32 hex>", …]}, … ]}
///
/// (unknown keys ignored). Its downloads are committed to the store in one batch, tokens hashed and
/// a URL's `user:password@` moved into the download's credential (`URLCredentials`: the download is
/// private to callers who give it, and the password is not stored). Then the journal, which holds
/// those tokens and passwords in clear, is deleted (with the `journal.json.tmp` a crash of the old
/// writer may have left). A crash between the commit and the deletion imports it again at the next
/// start, which writes the same rows again (by id).
///
/// What cannot be imported is kept for the operator (mode 0600), and start-up sweeps nothing while
/// it is there (the files of what was not imported would look like orphans): a journal that does
/// not parse is renamed `journal.json.corrupt`, one with entries that do not is imported without
/// them and renamed `journal.json.incomplete`. A journal that cannot be read (permissions, I/O)
/// stops start-up. The `journal.json.imported` copies an earlier release kept (tokens in clear) go.
enum JournalImport {
    static let fileName = "journal.json"

    enum Outcome: Equatable {
        case none
        /// `count` downloads imported; `skipped` entries could not be read, the journal kept at
        /// `keptAt` (nil when all were imported and the journal deleted).
        case imported(count: Int, skipped: Int, keptAt: String?)
        case unreadable(keptAt: String)
        /// No journal now, but one an earlier start could not wholly import is still kept there.
        case keptEarlier([String])

        /// Whether a journal held downloads that were not imported (their files must stay).
        var leftSomethingOut: Bool {
            switch self {
            case .none: false
            case .imported(_, let skipped, _): skipped > 0
            case .unreadable, .keptEarlier: true
            }
        }
    }

    /// Imports `journal.json` from `directory` into `store`, when there is one. `credential`: the
    /// keyed hash of a caller's headers (`CoalescingKey.credential`).
    static func run(directory: String, into store: StateStore,
                    credential: (CallerHeaders) -> [UInt8]) throws(StateStoreError) -> Outcome {
        let path = directory + "/" + fileName
        let aside = (try? FileManager.default.contentsOfDirectory(atPath: directory))?.filter { $0.hasPrefix(fileName + ".") } ?? []
        for name in aside where name.hasPrefix(fileName + ".imported") { FileStore.remove(directory + "/" + name) }
        guard let data = try read(path) else {
            let kept = aside.filter { $0.hasPrefix(fileName + ".incomplete") || $0.hasPrefix(fileName + ".corrupt") }
            return kept.isEmpty ? .none : .keptEarlier(kept.sorted().map { directory + "/" + $0 })
        }
        guard let (entries, unread) = decode(data) else {
            return .unreadable(keptAt: try setAside(path, suffix: ".corrupt"))
        }
        let downloads = entries.compactMap { $0.stored(credential: credential) }
        let skipped = unread + entries.count - downloads.count
        try store.commit(StateBatch(upserts: downloads))
        guard skipped == 0 else {
            return .imported(count: downloads.count, skipped: skipped, keptAt: try setAside(path, suffix: ".incomplete"))
        }
        // Deleted for sure, or start-up stops: a journal imported again later would write its
        // stale rows over newer state.
        for leftover in [path, path + ".tmp"] where unlink(leftover) != 0 && errno != ENOENT {
            throw StateStoreError(kind: .other, message: "cannot delete \(leftover) after importing it: \(String(cString: strerror(errno)))")
        }
        FileStore.syncDirectory(of: path)
        return .imported(count: downloads.count, skipped: 0, keptAt: nil)
    }

    /// The journal's bytes; nil when there is none. Any other failure to read it throws: start-up
    /// must not go on as if it were not there (the sweeps would delete the files it names).
    private static func read(_ path: String) throws(StateStoreError) -> Data? {
        do {
            return try Data(contentsOf: URL(fileURLWithPath: path))
        } catch CocoaError.fileReadNoSuchFile {
            return nil
        } catch {
            throw StateStoreError(kind: .other, message: "cannot read \(path): \(error.localizedDescription)")
        }
    }

    /// The journal's entries that could be read, and how many could not; nil when it is not a
    /// version-1 journal.
    private static func decode(_ data: Data) -> (entries: [Entry], skipped: Int)? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let document = try? decoder.decode(Document.self, from: data), document.version == 1 else { return nil }
        let entries = document.downloads.compactMap(\.entry)
        return (entries, document.downloads.count - entries.count)
    }

    private static func setAside(_ path: String, suffix: String) throws(StateStoreError) -> String {
        do throws(SystemError) {
            let kept = try FileStore.setAside(path, suffix: suffix)
            chmod(kept, 0o600)  // It holds caller tokens and URL passwords in clear.
            return kept
        } catch {
            throw StateStoreError(kind: .other, message: "could not rename \(path) aside: \(error)")
        }
    }

    private struct Document: Decodable {
        var version: Int
        var downloads: [Readable]
    }

    /// One entry, nil when it does not decode (the others are still read).
    private struct Readable: Decodable {
        var entry: Entry?
        init(from decoder: Decoder) throws { entry = try? Entry(from: decoder) }
    }

    private struct Entry: Decodable {
        struct Failure: Decodable {
            var code: String
            var message: String
            var httpStatus: Int?
        }

        struct Tags: Decodable {
            var etag: String?
            var lastModified: String?
        }

        var id: String
        var url: String
        var storage: StorageClass
        var state: DownloadState
        var validator: Tags?
        var expectedTotal: Int64?
        var verifiedOffset: Int64
        var expectedSHA256: String?
        var expectedSize: Int64?
        var fileName: String?
        var finalPath: String?
        var sha256: String?
        var size: Int64?
        var createdAt: Date
        var updatedAt: Date
        var lastAccess: Date
        var error: Failure?
        var tokens: [String]?

        /// nil: credentials in the URL that make no header (never stored public instead).
        func stored(credential: (CallerHeaders) -> [UInt8]) -> StoredDownload? {
            let (bare, authorization) = URLCredentials.split(url)
            var stored = StoredDownload(
                id: id, url: bare, storage: storage, state: state,
                validator: validator.map { Validator(etag: $0.etag, lastModified: $0.lastModified) },
                expectedTotal: expectedTotal, verifiedOffset: verifiedOffset, expectedSHA256: expectedSHA256,
                expectedSize: expectedSize, fileName: fileName, finalPath: finalPath, sha256: sha256, size: size,
                createdAt: createdAt, updatedAt: updatedAt, lastAccess: lastAccess,
                error: error.map { DownloadFailure(journalCode: $0.code, message: $0.message, httpStatus: $0.httpStatus) },
                tokens: Set((tokens ?? []).map(TokenHash.init(token:))))
            guard let authorization else { return stored }
            guard case .success(let headers) = CallerHeaders.validate([("Authorization", authorization)]) else { return nil }
            stored.credentialKey = credential(headers)
            return stored
        }
    }
}
