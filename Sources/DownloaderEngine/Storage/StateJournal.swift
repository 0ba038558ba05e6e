// The state journal — a stable format (scripts and benchmarks generate it; bump `version` on change).
//
// File: `<state dir>/journal.json`, mode 0600 (it holds caller tokens), replaced whole on every
// change: `journal.json.tmp` written, fsynced, renamed over, directory fsynced (a crash leaves the
// old or the new file; a torn `.tmp` is ignored and overwritten). Writes are coalesced, newest wins.
//
//   {"version": 1, "downloads": [ <entry>, … ]}
//
// An entry is `JournalEntry` as JSONEncoder would write it (sorted keys): keys are the property
// names; optionals are omitted when nil; dates are seconds since 1970 (a number). `storage` is "cache" | "persistent";
// `state` is "queued" | "downloading" | "paused" | "completed" | "failed"; `validator` is
// {"etag"?, "lastModified"?}; `error` is {"code", "message", "httpStatus"?} where `code` is a
// `DownloadFailure.Code` raw value (a code this build does not know loads as `.unknown` and is
// written back unchanged: a newer build's journal never fails to load); `tokens` is an array of
// 32-hex caller tokens. `verifiedOffset` is the durable length of `partials/<id>.part` (a start-up
// cuts the file back to it). A completed entry names its file in `finalPath` (with `sha256`, `size`);
// a not-yet-completed entry with `finalPath`, `sha256` and `size` is a publishing intent (the file was
// verified and fsynced; the start-up finishes the rename). Unknown keys are ignored.

import Basics
import Foundation
import Glibc

/// One download as it survives a restart.
struct JournalEntry: Sendable, Codable, Equatable {
    var id: String
    var url: String
    var storage: StorageClass
    var state: DownloadState
    var validator: Validator?
    /// Total size announced by the origin, when known.
    var expectedTotal: Int64?
    /// Bytes of the partial known to be on stable storage (never ahead of durable data).
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
    var error: DownloadFailure?
    /// Live caller tokens (secrets: the journal is mode 0600). Absent when there are none.
    var tokens: Set<String>? = nil
}

/// The engine's state file: `journal.json` in the state area, replaced atomically
/// (temp file, fsync, rename, fsync of the directory).
struct StateJournal: Sendable {
    struct Document: Codable, Equatable {
        var version: Int = 1
        var downloads: [JournalEntry]
    }

    let path: String

    init(directory: String) { path = directory + "/journal.json" }

    enum LoadResult: Equatable {
        case empty
        case loaded([JournalEntry])
        /// Unreadable; a copy was kept at `preservedAt`.
        case corrupt(preservedAt: String)
    }

    /// Reads the journal. A corrupt file is renamed to `journal.json.corrupt` and reported.
    func load() -> LoadResult {
        guard let data = FileManager.default.contents(atPath: path) else { return .empty }
        // The fast path parses with `JournalJSON` and maps by hand (Codable and JSONSerialization are
        // several times slower for 10 000 entries); what it does not understand goes through Codable.
        if let entries = Self.decodeFast(data) { return .loaded(entries) }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            let doc = try decoder.decode(Document.self, from: data)
            return .loaded(doc.downloads)
        } catch {
            let preserved = path + ".corrupt"
            unlink(preserved)
            rename(path, preserved)
            FileStore.syncDirectory(of: path)
            return .corrupt(preservedAt: preserved)
        }
    }

    /// The fast loader: `JournalJSON` mapped by hand. nil when the document is not what it expects.
    static func decodeFast(_ data: Data) -> [JournalEntry]? {
        let parsed = data.withUnsafeBytes { JournalJSON.parse($0) }
        guard case .object(let document)? = parsed, case .number(1)? = document["version"],
              case .array(let list)? = document["downloads"] else { return nil }
        var entries: [JournalEntry] = []
        entries.reserveCapacity(list.count)
        for item in list {
            guard case .object(let object) = item, let entry = JournalEntry(json: object) else { return nil }
            entries.append(entry)
        }
        return entries
    }

    /// The document for `entries` (see the format above; written by `JournalEntry.write(into:)`).
    static func encode(_ entries: [JournalEntry]) -> Data? {
        var out: [UInt8] = []
        out.reserveCapacity(64 + entries.count * 640)
        out.append(contentsOf: #"{"downloads":["#.utf8)
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            entry.write(into: &out)
        }
        out.append(contentsOf: #"],"version":1}"#.utf8)
        return Data(out)
    }

    /// Replaces the journal with `data` so that a crash leaves either the old or the new file.
    /// `midWrite` runs once half of the temporary file is written (crash tests).
    func write(_ data: Data, midWrite: (() -> Void)? = nil) throws(SystemError) {
        let temp = path + ".tmp"
        let fd = try syscall("open") { open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        do throws(SystemError) {
            let failure = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> SystemError? in
                guard let base = raw.baseAddress else { return nil }
                var done = 0
                var halfway = midWrite
                while done < raw.count {
                    if done >= raw.count / 2, let call = halfway {
                        halfway = nil
                        call()
                    }
                    let end = halfway == nil ? raw.count : max(1, raw.count / 2)
                    do throws(SystemError) {
                        done += try syscall("write") { Glibc.write(fd, base + done, end - done) }
                    } catch {
                        return error
                    }
                }
                return nil
            }
            if let failure { throw failure }
            try syscall("fsync") { fsync(fd) }
        } catch {
            Glibc.close(fd)
            unlink(temp)
            throw error
        }
        Glibc.close(fd)
        try syscall("rename") { rename(temp, path) }
        FileStore.syncDirectory(of: path)
    }
}
