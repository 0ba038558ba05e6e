import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// Start-up with 10 000 stored downloads: what loads, what is dropped, what is swept. (The time it
/// takes belongs to the benchmark; this only checks the outcome.)
@Suite struct RecoveryScaleTests {
    static func id(_ n: Int) -> String { String(format: "%016x", 0x1000_0000_0000 + n) }

    /// Creates `path` holding `bytes` (plain open/write: FileManager's atomic writes are slow by the thousand).
    static func file(_ path: String, _ bytes: [UInt8]) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    @Test func tenThousandRecordsLoadCorrectly() async throws {
        let root = EngineFixture.root()
        let state = root.appendingPathComponent("state")
        let partials = state.appendingPathComponent("partials")
        let cache = root.appendingPathComponent("cache")
        for dir in [partials, cache, root.appendingPathComponent("data")] {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        }
        let now = Date()
        func entry(_ n: Int, _ state: DownloadState) -> StoredDownload {
            StoredDownload(id: Self.id(n), url: "https://o.test/f\(n)", storage: .cache, state: state,
                         validator: Validator(etag: "\"e\(n)\""), expectedTotal: 100, verifiedOffset: 0,
                         expectedSHA256: nil, expectedSize: nil, fileName: "f\(n).bin", finalPath: nil, sha256: nil, size: nil,
                         createdAt: now.addingTimeInterval(Double(n) / 1000), updatedAt: now, lastAccess: now, error: nil)
        }
        var entries: [StoredDownload] = []
        // 0..<4990 completed with their files; 4990..<5990 completed whose files vanished.
        for n in 0..<5990 {
            var e = entry(n, .completed)
            e.finalPath = cache.appendingPathComponent("\(Self.id(n))-f\(n).bin").path
            e.sha256 = SHA256Hasher.hex([UInt8(n & 0xff)])
            e.size = 1
            if n < 4990 { Self.file(e.finalPath!, [UInt8(n & 0xff)]) }
            entries.append(e)
        }
        // 5990..<8990 paused with 40 durable bytes; the file holds 60 (a crash tail).
        for n in 5990..<8990 {
            var e = entry(n, .paused)
            e.verifiedOffset = 40
            Self.file(partials.appendingPathComponent("\(Self.id(n)).part").path, [UInt8](repeating: 7, count: 60))
            entries.append(e)
        }
        // 8990..<9990 failed; 9990..<10000 running with a caller each.
        for n in 8990..<9990 {
            var e = entry(n, .failed)
            e.error = DownloadFailure(code: .httpError, message: "HTTP 404", httpStatus: 404)
            entries.append(e)
        }
        for n in 9990..<10_000 {
            var e = entry(n, .downloading)
            e.tokens = [TokenHash(token: String(format: "%032x", n))]
            entries.append(e)
        }
        try StateFixture.write(entries, to: state.path)
        // Leftovers no entry owns.
        for n in 20_000..<20_050 {
            Self.file(partials.appendingPathComponent("\(Self.id(n)).part").path, [1])
        }
        Self.file(partials.appendingPathComponent("\(Self.id(1)).part.9.trash").path, [1])

        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(root, driver: driver)
        #expect(engine.recovery.loaded == 9000 && engine.recovery.dropped == 1000)
        let all = engine.list()
        var byState: [DownloadState: Int] = [:]
        for s in all { byState[s.state, default: 0] += 1 }
        #expect(all.count == 9000)
        #expect(byState[.completed] == 4990 && byState[.paused] == 3000 && byState[.failed] == 1000)
        #expect((byState[.downloading] ?? 0) + (byState[.queued] ?? 0) == 10)
        #expect(engine.completedFile(id: Self.id(17))?.size == 1)
        #expect(engine.snapshot(id: Self.id(5000)) == nil)
        let paused = try #require(engine.snapshot(id: Self.id(6000)))
        #expect(paused.bytesWritten == 40 && paused.resumable)
        #expect(FileStore.fileSize(partials.appendingPathComponent("\(Self.id(6000)).part").path) == 40)
        let running = Set((9990..<10_000).map { "\(Self.id($0)).part" })
        let left = try FileManager.default.contentsOfDirectory(atPath: partials.path).filter { !running.contains($0) }
        #expect(left.count == 3000, "orphan and set-aside partials are swept")
        // Running ones carry on with their callers, whose tokens still work.
        try await withTimeout(5) { await driver.waitForStarts(4) }
        #expect(engine.cancel(token: String(format: "%032x", 9995))?.id == Self.id(9995))
        await engine.shutdown()
    }
}
