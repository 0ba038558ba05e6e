import Basics
import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Start-up from a table of stored downloads, one of each case recovery tells apart: what comes
/// back (state, bytes, where the file is), what is dropped from the store, what is swept from disk.
@Suite struct RecoveryTableTests {
    static func id(_ n: Int) -> String { String(format: "%016llx", 0xabc0_0000_0000 + n) }

    struct Area {
        let root = EngineFixture.root()
        var state: String { root.appendingPathComponent("state").path }
        var partials: String { state + "/partials" }
        var cache: String { root.appendingPathComponent("cache").path }
        var data: String { root.appendingPathComponent("data").path }
        var elsewhere: String { root.appendingPathComponent("elsewhere").path }

        init() throws {
            for dir in [partials, cache, data, elsewhere] {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            }
        }

        func names(_ dir: String) throws -> Set<String> { Set(try FileManager.default.contentsOfDirectory(atPath: dir)) }
    }

    static func entry(_ n: Int, _ state: DownloadState, age: Double = 0, url: String? = nil) -> StoredDownload {
        let at = Date().addingTimeInterval(-age)
        return StoredDownload(id: id(n), url: url ?? "http://o.test/f\(n)", storage: .cache, state: state,
                              validator: Validator(etag: "\"e\(n)\""), expectedTotal: 100, verifiedOffset: 0,
                              expectedSHA256: nil, expectedSize: nil, fileName: "f\(n).bin", finalPath: nil, sha256: nil,
                              size: nil, createdAt: at, updatedAt: at, lastAccess: at, error: nil)
    }

    /// A completed download whose one-byte file is in `dir` (nil: the file vanished, in the cache area).
    static func completed(_ n: Int, in dir: String?, _ area: Area, storage: StorageClass = .cache) -> StoredDownload {
        var e = entry(n, .completed)
        e.storage = storage
        e.finalPath = (dir ?? area.cache) + "/\(id(n))-f\(n).bin"
        e.sha256 = SHA256Hasher.hex([UInt8(n)])
        e.size = 1
        if dir != nil { RecoveryScaleTests.file(e.finalPath!, [UInt8(n)]) }
        return e
    }

    @Test func aTableOfStoredDownloadsComesBackAsStored() async throws {
        let area = try Area()
        var entries: [StoredDownload] = []
        entries.append(Self.completed(0, in: area.cache, area))                         // kept, in place
        entries.append(Self.completed(1, in: nil, area))                                // dropped: file gone
        entries.append(Self.completed(2, in: area.elsewhere, area))                     // kept (stat), moved to cache
        entries.append(Self.completed(3, in: area.cache, area, storage: .persistent))   // kept, moved to data
        entries.append(Self.completed(4, in: area.data, area, storage: .persistent))    // kept, in place
        entries.append(Self.completed(5, in: area.cache, area))                         // same URL as 6: kept, joined
        var sameURL = Self.entry(6, .paused, url: "http://o.test/f5")                   // kept too
        sameURL.verifiedOffset = 10
        RecoveryScaleTests.file(area.partials + "/\(Self.id(6)).part", [UInt8](repeating: 6, count: 10))
        entries.append(sameURL)
        var paused = Self.entry(7, .paused)                                             // cut back to 40
        paused.verifiedOffset = 40
        RecoveryScaleTests.file(area.partials + "/\(Self.id(7)).part", [UInt8](repeating: 7, count: 60))
        entries.append(paused)
        var expired = Self.entry(8, .paused, age: 7200)                                 // purged: past its TTL
        expired.verifiedOffset = 20
        RecoveryScaleTests.file(area.partials + "/\(Self.id(8)).part", [UInt8](repeating: 8, count: 20))
        entries.append(expired)
        entries.append(Self.entry(9, .paused, age: 30))                                 // empty, oldest: forgotten
        entries.append(Self.entry(10, .paused, age: 20))                                // empty: kept (limit 2)
        entries.append(Self.entry(11, .paused, age: 10))                                // empty: kept
        var failed = Self.entry(12, .failed)
        failed.error = DownloadFailure(code: .httpError, message: "HTTP 404", httpStatus: 404)
        entries.append(failed)
        try StateFixture.write(entries, to: area.state)
        // A second row of id 0, as an earlier release could leave (the store writes one row per id): skipped.
        let raw = try SQLiteConnection(path: area.state + "/" + SQLiteStateStore.fileName)
        try raw.execute("CREATE TEMP TABLE copy AS SELECT * FROM downloads WHERE id = '\(Self.id(0))'; "
                        + "UPDATE copy SET row = row + 1000, url = 'http://o.test/other'; INSERT INTO downloads SELECT * FROM copy")
        raw.close()
        RecoveryScaleTests.file(area.cache + "/\(Self.id(99))-orphan.bin", [9])            // swept
        RecoveryScaleTests.file(area.data + "/\(Self.id(98))-kept.bin", [9])               // the data area is never swept,
        RecoveryScaleTests.file(area.data + "/\(Self.id(96))-f.bin.tmp-copy", [9])         // but for a copy cut short
        RecoveryScaleTests.file(area.partials + "/\(Self.id(97)).part", [9])               // swept

        let engine = try EngineFixture.engine(area.root, driver: FakeTransferDriver()) {
            $0.pausedTTL = 3600
            $0.maxEmptyPausedDownloads = 2
        }
        let report = engine.recovery
        #expect(report.loaded == 12 && report.dropped == 1 && report.resumed == 0 && report.published == 0)
        var states: [Int: DownloadState] = [:]
        for n in 0...12 { states[n] = engine.snapshot(id: Self.id(n))?.state }
        #expect(states == [0: .completed, 2: .completed, 3: .completed, 4: .completed, 5: .completed,
                           6: .paused, 7: .paused, 10: .paused, 11: .paused, 12: .failed])
        #expect(engine.snapshot(id: Self.id(0))?.url == "http://o.test/f0", "the first of two rows with one id is kept")
        #expect(engine.snapshot(id: Self.id(7))?.bytesWritten == 40)
        #expect(engine.snapshot(id: Self.id(6))?.bytesWritten == 10)
        #expect(engine.peek(DownloadRequest(url: "http://o.test/f5"))?.id == Self.id(5), "new callers join the completed one")
        #expect(FileStore.fileSize(area.partials + "/\(Self.id(7)).part") == 40)
        // A file outside its storage class's area is moved into it (an interrupted move is redone);
        // the old name goes once the new path is committed.
        for (n, from, to) in [(2, area.elsewhere, area.cache), (3, area.cache, area.data)] {
            let (moved, left) = (to + "/\(Self.id(n))-f\(n).bin", from + "/\(Self.id(n))-f\(n).bin")
            try await withTimeout(5) {
                while engine.completedFile(id: Self.id(n))?.path != moved || FileStore.fileSize(left) != nil {
                    try? await Task.sleep(nanoseconds: 5_000_000)
                }
            }
            #expect(FileStore.fileSize(moved) == 1)
        }
        // On disk: the orphans went, every kept file stayed.
        #expect(try area.names(area.partials) == ["\(Self.id(6)).part", "\(Self.id(7)).part"])
        #expect(try area.names(area.cache) == ["\(Self.id(0))-f0.bin", "\(Self.id(2))-f2.bin", "\(Self.id(5))-f5.bin"])
        #expect(try area.names(area.data) == ["\(Self.id(3))-f3.bin", "\(Self.id(4))-f4.bin", "\(Self.id(98))-kept.bin"])
        // In the store: the dropped, skipped and forgotten rows are gone.
        let stored = try StateFixture.stored(engine)
        #expect(Set(stored.map(\.id)) == Set([0, 2, 3, 4, 5, 6, 7, 10, 11, 12].map(Self.id)))
        #expect(stored.first { $0.id == Self.id(7) }?.verifiedOffset == 40)
        await engine.shutdown()
    }

    @Test func aCompletedFileIsFoundInItsAreaOrElsewhereWithoutBeingClaimedUntilAsked() throws {
        let area = try Area()
        let (a, b) = (Self.id(1), Self.id(2))
        RecoveryScaleTests.file(area.cache + "/\(a)-x.bin", [1])
        RecoveryScaleTests.file(area.data + "/\(b)-y.bin", [2])
        RecoveryScaleTests.file(area.elsewhere + "/\(a)-z.bin", [3])
        var files = StoredFiles(cache: AreaListing(area.cache), data: AreaListing(area.data))
        let inCache = files.presence(of: area.cache + "/\(a)-x.bin", id: a)
        guard case .inCache = inCache else { Issue.record("\(inCache)"); return }
        guard case .inData = files.presence(of: area.data + "/\(b)-y.bin", id: b) else { Issue.record("data"); return }
        #expect(files.presence(of: area.elsewhere + "/\(a)-z.bin", id: a) == .outside)
        #expect(files.presence(of: area.elsewhere + "/\(a)-gone.bin", id: a) == .absent)
        #expect(files.presence(of: area.cache + "/\(a)-gone.bin", id: a) == .absent)
        #expect(files.presence(of: area.data + "/\(a)-x.bin", id: a) == .absent, "in the data area, not listed there")
        // A lookup claims nothing: unclaimed files are swept.
        files.cache.removeUnclaimed()
        #expect(FileStore.fileSize(area.cache + "/\(a)-x.bin") == nil)

        RecoveryScaleTests.file(area.cache + "/\(a)-x.bin", [1])
        files = StoredFiles(cache: AreaListing(area.cache), data: AreaListing(area.data))
        let found = files.claim(files.presence(of: area.cache + "/\(a)-x.bin", id: a))
        let (absent, outside) = (files.claim(.absent), files.claim(.outside))
        #expect(found && !absent && outside)
        files.cache.removeUnclaimed()
        #expect(FileStore.fileSize(area.cache + "/\(a)-x.bin") == 1, "claimed: kept")
    }

    /// The areas given under other names since the files were stored (the old spelling a symlink
    /// to the same directory): each file is found in its area's listing and its path respelled,
    /// never swept from the cache as unclaimed nor unlinked as its own "old name".
    @Test func filesStoredUnderAnotherNameOfTheirAreaAreKeptAndRespelled() async throws {
        let area = try Area()
        let (cacheAlias, dataAlias) = (area.root.path + "/cache-alias", area.root.path + "/data-alias")
        #expect(symlink(area.cache, cacheAlias) == 0 && symlink(area.data, dataAlias) == 0)
        var inCache = Self.completed(1, in: area.cache, area)
        inCache.finalPath = cacheAlias + "/\(Self.id(1))-f1.bin"
        var inData = Self.completed(2, in: area.data, area, storage: .persistent)
        inData.finalPath = dataAlias + "/\(Self.id(2))-f2.bin"
        try StateFixture.write([inCache, inData], to: area.state)

        let engine = try EngineFixture.engine(area.root, driver: FakeTransferDriver())
        #expect(engine.recovery.dropped == 0)
        #expect(engine.completedFile(id: Self.id(1))?.path == area.cache + "/\(Self.id(1))-f1.bin")
        #expect(engine.completedFile(id: Self.id(2))?.path == area.data + "/\(Self.id(2))-f2.bin")
        // A move (there must be none) runs on the work queue: past this barrier, any queued at start-up has run.
        try await onThread { engine.core.workQueue.sync(flags: .barrier) {} }
        #expect(try area.names(area.cache) == ["\(Self.id(1))-f1.bin"])
        #expect(try area.names(area.data) == ["\(Self.id(2))-f2.bin"])
        let stored = try StateFixture.stored(engine)
        #expect(Set(stored.compactMap(\.finalPath)) == [area.cache + "/\(Self.id(1))-f1.bin", area.data + "/\(Self.id(2))-f2.bin"])
        await engine.shutdown()
    }

    @Test func theCacheAndDataAreasMayNotBeOneDirectoryUnderTwoNames() async throws {
        let area = try Area()
        let alias = area.root.path + "/data-alias"
        #expect(symlink(area.cache, alias) == 0)
        var c = EngineFixture.configuration(area.root)
        c.dataDirectory = URL(fileURLWithPath: alias)
        #expect(throws: SystemError.self) { _ = try DownloadEngine(configuration: c, driver: FakeTransferDriver()) }
        c.dataDirectory = c.cacheDirectory.appendingPathComponent(".")  // The same path for both is one area.
        let engine = try DownloadEngine(configuration: c, driver: FakeTransferDriver())
        #expect(engine.core.store.dataDirectory == engine.core.store.cacheDirectory)
        await engine.shutdown()
    }

    @Test func anAreaThatCannotBeListedSaysWhy() {
        let files = StoredFiles(cache: AreaListing("/nonexistent-\(UInt64.random(in: 0...UInt64.max))"), data: AreaListing("/"))
        #expect(files.failure?.errno == ENOENT)
        #expect(files.failure?.function.hasPrefix("opendir ") == true)
        #expect(StoredFiles(cache: AreaListing("/"), data: AreaListing("/")).failure == nil)
    }

    /// `C`/`D` stand for the cache and data areas. A false answer only means `placeFile` looks again
    /// (with `String` equality): the precomposed é is not byte for byte an e with its accent.
    @Test(arguments: [
        ("C/0123456789abcdef-a.bin", "a.bin", StorageClass.cache, true),
        ("D/0123456789abcdef-a.bin", "a.bin", .persistent, true),
        ("C/0123456789abcdef-a.bin", "a.bin", .persistent, false),
        ("C/0123456789abcdef-a.bin", "b.bin", .cache, false),
        ("C/0123456789abcdef-a.bin", "a.bi", .cache, false),
        ("C/0123456789abcdee-a.bin", "a.bin", .cache, false),
        ("C/0123456789abcdef_a.bin", "a.bin", .cache, false),
        ("C/x/0123456789abcdef-a.bin", "a.bin", .cache, false),
        ("C/0123456789abcdef-\u{301}a.bin", "a.bin", .cache, false),
        ("C/0123456789abcdef-\u{301}a.bin", "\u{301}a.bin", .cache, true),
        ("C/0123456789abcdef-\u{e9}.bin", "e\u{301}.bin", .cache, false),
    ])
    func finalPathsAreComparedByteByByte(path: String, name: String, storage: StorageClass, expected: Bool) throws {
        let store = try FileStore(configuration: EngineConfiguration(root: EngineFixture.root()))
        let full = (path.hasPrefix("C/") ? store.cacheDirectory : store.dataDirectory) + path.dropFirst()
        #expect(store.isFinalPath(full, id: "0123456789abcdef", fileName: name, storage: storage) == expected)
        if expected { #expect(full == store.finalPath(id: "0123456789abcdef", fileName: name, storage: storage)) }
    }
}
