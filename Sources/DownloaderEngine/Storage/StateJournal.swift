// The state journal — a stable format (scripts and benchmarks generate it; bump `version` on change).
//
// File: `<state dir>/journal.json`, mode 0600 (it holds caller tokens), replaced whole on every
// change: `journal.json.tmp` written, fsynced, renamed over, directory fsynced (a crash leaves the
// old or the new file; a torn `.tmp` is ignored and overwritten). Writes are coalesced, newest wins.
//
//   {"version": 1, "downloads": [ <entry>, … ]}
//
// An entry is `JournalEntry` as JSONEncoder writes it: keys are the property names; optionals are
// omitted when nil; dates are seconds since 1970 (a number). `storage` is "cache" | "persistent";
// `state` is "queued" | "downloading" | "paused" | "completed" | "failed"; `validator` is
// {"etag"?, "lastModified"?}; `error` is {"code", "message", "httpStatus"?}; `tokens` is an array of
// 32-hex caller tokens. `verifiedOffset` is the durable length of `partials/<id>.part` (a start-up
// cuts the file back to it). A completed entry names its file in `finalPath` (with `sha256`, `size`);
// a not-yet-completed entry with `finalPath`, `sha256` and `size` is a publishing intent (the file was
// verified and fsynced; the start-up finishes the rename). Unknown keys are ignored.

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

extension JournalEntry {
    /// From a parsed journal object; nil when anything is missing or of the wrong type.
    init?(json o: [String: JournalJSON]) {
        func string(_ key: String) -> String?? {
            guard let value = o[key] else { return .some(nil) }
            guard case .string(let text) = value else { return nil }
            return .some(text)
        }
        func int64(_ key: String) -> Int64?? {
            guard let value = o[key] else { return .some(nil) }
            guard case .number(let n) = value, let exact = Int64(exactly: n) else { return nil }
            return .some(exact)
        }
        func date(_ key: String) -> Date? {
            guard case .number(let n)? = o[key] else { return nil }
            return Date(timeIntervalSince1970: n)
        }
        guard let id = string("id") ?? nil, let url = string("url") ?? nil,
              let storage = (string("storage") ?? nil).flatMap(StorageClass.init(rawValue:)),
              let state = (string("state") ?? nil).flatMap(DownloadState.init(rawValue:)),
              let verifiedOffset = int64("verifiedOffset") ?? nil,
              let createdAt = date("createdAt"), let updatedAt = date("updatedAt"), let lastAccess = date("lastAccess"),
              let expectedTotal = int64("expectedTotal"), let expectedSize = int64("expectedSize"), let size = int64("size"),
              let expectedSHA256 = string("expectedSHA256"), let fileName = string("fileName"),
              let finalPath = string("finalPath"), let sha256 = string("sha256")
        else { return nil }
        var validator: Validator?
        if let value = o["validator"] {
            guard case .object(let v) = value else { return nil }
            var etag: String?
            var lastModified: String?
            if let e = v["etag"] {
                guard case .string(let text) = e else { return nil }
                etag = text
            }
            if let l = v["lastModified"] {
                guard case .string(let text) = l else { return nil }
                lastModified = text
            }
            validator = Validator(etag: etag, lastModified: lastModified)
        }
        var error: DownloadFailure?
        if let value = o["error"] {
            guard case .object(let e) = value, case .string(let code)? = e["code"], case .string(let message)? = e["message"]
            else { return nil }
            var status: Int?
            if let s = e["httpStatus"] {
                guard case .number(let n) = s, let exact = Int(exactly: n) else { return nil }
                status = exact
            }
            error = DownloadFailure(code: code, message: message, httpStatus: status)
        }
        var tokens: Set<String>?
        if let value = o["tokens"] {
            guard case .array(let list) = value else { return nil }
            var set = Set<String>(minimumCapacity: list.count)
            for item in list {
                guard case .string(let token) = item else { return nil }
                set.insert(token)
            }
            tokens = set
        }
        self.init(id: id, url: url, storage: storage, state: state, validator: validator, expectedTotal: expectedTotal,
                  verifiedOffset: verifiedOffset, expectedSHA256: expectedSHA256, expectedSize: expectedSize,
                  fileName: fileName, finalPath: finalPath, sha256: sha256, size: size, createdAt: createdAt,
                  updatedAt: updatedAt, lastAccess: lastAccess, error: error, tokens: tokens)
    }
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

    static func encode(_ entries: [JournalEntry]) -> Data? {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return try? encoder.encode(Document(downloads: entries))
    }

    /// Replaces the journal with `data` so that a crash leaves either the old or the new file.
    /// `midWrite` runs once half of the temporary file is written (crash tests).
    func write(_ data: Data, midWrite: (() -> Void)? = nil) throws(SystemError) {
        let temp = path + ".tmp"
        let fd = try retryingEINTR("open") { open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
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
                        done += try retryingEINTR("write") { Glibc.write(fd, base + done, end - done) }
                    } catch {
                        return error
                    }
                }
                return nil
            }
            if let failure { throw failure }
            try retryingEINTR("fsync") { fsync(fd) }
        } catch {
            Glibc.close(fd)
            unlink(temp)
            throw error
        }
        Glibc.close(fd)
        try retryingEINTR("rename") { rename(temp, path) }
        FileStore.syncDirectory(of: path)
    }
}

/// Writes journal snapshots on its own serial queue, newest wins: callers never wait for disk.
/// Two ways in: `submit` hands over a snapshot; `markDirty` (the engine's way) only says that state
/// changed, and the snapshot is taken from `source` when the write starts, so a burst of changes
/// costs one snapshot, not one per change. Writes start at most every `minInterval` seconds,
/// except `flush()`, which writes at once. Never call `flush()` while holding what `source` takes.
final class JournalWriter: @unchecked Sendable {
    private let journal: StateJournal
    private let queue = DispatchQueue(label: "download-engine.journal")
    private let lock = NSLock()
    // Guarded by `lock`.
    private var pending: (generation: UInt64, entries: [JournalEntry])?
    private var dirty = false
    private var scheduled = false
    private var lastWriteEnd: UInt64 = 0
    /// The last write error, for diagnostics.
    private(set) var lastError: SystemError?
    /// The current state and its generation, taken on the writer's queue (pull mode). Set once, before use.
    var source: (@Sendable () -> (generation: UInt64, entries: [JournalEntry]))?
    private let minInterval: Double
    // Only the queue touches these.
    private var written: UInt64 = 0
    /// Crash tests: SIGKILL the process half-way through this write (1-based).
    private var crashAtWrite: Int?
    private var writes = 0

    init(journal: StateJournal, crashAtWrite: Int? = nil, minInterval: Double = 0) {
        self.journal = journal
        self.crashAtWrite = crashAtWrite
        self.minInterval = minInterval
    }

    /// Queues `entries` (taken at `generation`); older pending snapshots are dropped.
    func submit(_ entries: [JournalEntry], generation: UInt64) {
        lock.lock()
        if (pending?.generation ?? 0) < generation { pending = (generation, entries) }
        scheduleLocked()
        lock.unlock()
    }

    /// The state changed: a write follows, with a snapshot from `source` taken when it starts.
    func markDirty() {
        lock.lock()
        dirty = true
        scheduleLocked()
        lock.unlock()
    }

    private func scheduleLocked() {
        guard !scheduled else { return }
        scheduled = true
        let earliest = lastWriteEnd + UInt64(minInterval * 1e9)
        let now = DispatchTime.now().uptimeNanoseconds
        if earliest > now {
            queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: earliest)) { self.drain() }
        } else {
            queue.async { self.drain() }
        }
    }

    private func drain() {
        lock.lock()
        var next = pending
        pending = nil
        let pull = dirty
        dirty = false
        scheduled = false
        lock.unlock()
        if pull, let source {
            let snapshot = source()
            if snapshot.generation > (next?.generation ?? 0) { next = snapshot }
        }
        guard let next, next.generation > written, let data = StateJournal.encode(next.entries) else { return }
        writes += 1
        let crash: (() -> Void)? = writes == crashAtWrite ? { _ = kill(getpid(), SIGKILL) } : nil
        do throws(SystemError) {
            try journal.write(data, midWrite: crash)
            written = next.generation
        } catch {
            lock.lock(); lastError = error; lock.unlock()
        }
        lock.lock(); lastWriteEnd = DispatchTime.now().uptimeNanoseconds; lock.unlock()
    }

    /// Writes everything submitted or marked so far, now, and waits until it is on disk.
    func flush() {
        queue.sync { self.drain() }
    }
}
