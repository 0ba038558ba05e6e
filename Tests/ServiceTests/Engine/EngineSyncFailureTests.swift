import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

/// A partial's fdatasync that reports an I/O error: the bytes it was to make durable may be lost
/// (Linux reports a failed writeback once; a later sync "succeeds" without them), so they are
/// never resumed on: the next attempt keeps only what an earlier sync made durable.
@Suite(.timeLimit(.minutes(2)))
struct EngineSyncFailureTests {
    /// Makes the `number`th fdatasync of a partial (checkpoint or settle) fail with EIO; the count of syncs so far.
    static func failSync(number: Int, of engine: DownloadEngine, errno code: Int32 = EIO) -> OriginLock<Int> {
        let syncs = OriginLock(0)
        engine.core.locked {
            engine.core.hooks.partialSync = { fd in
                guard syncs.withLock({ $0 += 1; return $0 }) == number else { return fdatasync(fd) }
                errno = code
                return -1
            }
        }
        return syncs
    }

    @Test func bytesWhoseSyncFailedWithEIOAreFetchedAgainNotResumedOn() async throws {
        let origin = try TestOrigin(bodySize: 2 << 20)
        defer { origin.stop() }
        origin.inject(.cut(afterBodyBytes: 1 << 20))
        let engine = try EngineLiveTests.engine {
            $0.checkpointBytes = 1 << 40  // no checkpoint: the settle's sync is the first
            $0.checkpointInterval = 3600
        }
        let syncs = Self.failSync(number: 1, of: engine)
        let (r, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
        #expect(gets.count == 2 && gets.last?.header("Range") == nil, "fetched again from 0: \(gets.map { $0.header("Range") ?? "-" })")
        #expect(syncs.withLock { $0 } == 1, "the settle's sync, which failed")
        await engine.shutdown()
    }

    /// The fsync before publishing fails (the whole body arrived, no checkpoint made any of it
    /// durable): the download fails with the disk error and keeps nothing, neither the bytes nor
    /// their hash; a new request fetches the file again from 0 (a resume would have found the
    /// bytes whole, asked past the end, and published them after a second fsync that "succeeds").
    @Test func bytesWhosePublishSyncFailedAreFetchedAgain() async throws {
        let origin = try TestOrigin(bodySize: 2 << 20)
        defer { origin.stop() }
        let engine = try EngineLiveTests.engine {
            $0.checkpointBytes = 1 << 40
            $0.checkpointInterval = 3600
        }
        let fsyncs = OriginLock(0)
        engine.core.locked {
            engine.core.hooks.publishSync = { fd in
                guard fsyncs.withLock({ $0 += 1; return $0 }) == 1 else { return fsync(fd) }
                errno = EIO
                return -1
            }
        }
        let (r, failed) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(failed.state == .failed && failed.error?.code == .diskError, "\(failed)")
        #expect(failed.bytesWritten == 0, "kept nothing a sync made durable: \(failed.bytesWritten)")
        let (_, done) = try await EngineLiveTests.requestAgain(engine, origin.url, id: r.snapshot.id)
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
        #expect(gets.count == 2 && gets.last?.header("Range") == nil, "fetched again from 0: \(gets.map { $0.header("Range") ?? "-" })")
        #expect(fsyncs.withLock { $0 } == 2)
        await engine.shutdown()
    }

    /// Checkpoints made the first MiB durable, then every sync fails (the later checkpoints' and
    /// the settle's own): the download fails with the disk error but keeps what the checkpoints
    /// made durable (it kept none of this attempt's bytes), and a new request resumes from there.
    @Test func bytesEarlierCheckpointsMadeDurableAreKeptWhenTheSettlesSyncFails() async throws {
        let origin = try TestOrigin(bodySize: 3 << 20)
        defer { origin.stop() }
        origin.update { $0.bytesPerSecond = 2 << 20 }  // paced: checkpoints land while the body arrives
        let engine = try EngineLiveTests.engine { $0.checkpointBytes = 1 << 20 }
        let phase = OriginLock(0)  // 0: syncs work, 1: they fail, 2: they work again
        let checkpoints = OriginLock<[Int64]>([])  // The offsets stored after a successful sync.
        engine.core.locked {
            engine.core.hooks.partialSync = { fd in
                guard phase.withLock({ $0 }) == 1 else { return fdatasync(fd) }
                errno = EIO
                return -1
            }
            engine.core.hooks.checkpointed = { _, length in
                checkpoints.withLock { $0.append(length) }
                if length >= 1 << 20 { phase.withLock { if $0 == 0 { $0 = 1 } } }
            }
        }
        let (r, failed) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url))
        #expect(failed.state == .failed && failed.error?.code == .diskError, "\(failed)")
        let kept = failed.bytesWritten
        #expect(kept >= 1 << 20 && kept < 3 << 20, "kept what the checkpoints made durable: \(kept)")
        let lastGood = try #require(checkpoints.withLock { $0.max() })
        #expect(kept <= lastGood, "never past the last checkpoint whose sync succeeded: \(kept) > \(lastGood)")
        phase.withLock { $0 = 2 }
        let (_, done) = try await EngineLiveTests.requestAgain(engine, origin.url, id: r.snapshot.id)
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
        #expect(gets.last?.header("Range") == "bytes=\(kept)-", "\(gets.map { $0.header("Range") ?? "-" })")
        await engine.shutdown()
    }

    /// The same for a checkpoint's sync: the settle's own sync of that file then "succeeds", so
    /// the failure must be remembered. The whole body arrived: it is not published (its bytes on
    /// disk may not be the ones hashed), the download fails with the disk error and keeps only
    /// what the offset stored before the failure covers; a new request fetches the rest.
    /// An engine checkpointing every MiB on `connections`, of a 24 MiB origin.
    static func checkpointing(connections: Int) throws -> (TestOrigin, DownloadEngine) {
        let origin = try TestOrigin(bodySize: 24 << 20)
        let engine = try EngineLiveTests.engine {
            $0.checkpointBytes = 1 << 20
            $0.maxConnectionsPerDownload = connections
            $0.segmentProbeSeconds = 0
        }
        return (origin, engine)
    }

    @Test(arguments: [1, 2])
    func aFailedCheckpointSyncIsNeverPublishedNorResumedOn(connections: Int) async throws {
        let (origin, engine) = try Self.checkpointing(connections: connections)
        defer { origin.stop() }
        _ = Self.failSync(number: 2, of: engine)  // The second checkpoint's sync; every other one works.
        let checkpoints = OriginLock<[Int64]>([])  // The offsets stored after a successful sync (of the prefix).
        engine.core.locked { engine.core.hooks.checkpointed = { _, length in checkpoints.withLock { $0.append(length) } } }
        let (r, failed) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url, connections: connections))
        #expect(failed.state == .failed && failed.error?.code == .diskError, "\(failed)")
        #expect(failed.bytesWritten < 24 << 20, "kept only what was synced before the failure: \(failed.bytesWritten)")
        #expect(engine.completedFile(id: r.snapshot.id) == nil)
        if connections == 1 {
            // (Segmented, the pieces' checkpoints do not go through the hook, and the resume is several ranges.)
            let lastGood = try #require(checkpoints.withLock { $0.max() }, "the first checkpoint's sync succeeded")
            #expect(failed.bytesWritten > 0 && failed.bytesWritten <= lastGood,
                    "never past the last checkpoint whose sync succeeded: \(failed.bytesWritten), \(checkpoints.withLock { $0 })")
        }
        let (_, done) = try await EngineLiveTests.requestAgain(engine, origin.url, id: r.snapshot.id)
        #expect(done.state == .completed)
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        if connections == 1 {
            let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
            #expect(gets.last?.header("Range") == "bytes=\(failed.bytesWritten)-", "\(gets.map { $0.header("Range") ?? "-" })")
        }
        await engine.shutdown()
    }

    /// A checkpoint's sync that finds the disk full (NFS, btrfs): nothing of that attempt is
    /// published; the download waits for space (`SpaceWait`; there is room at once here) and
    /// resumes from what earlier checkpoints made durable, never failing.
    @Test(arguments: [1, 2])
    func aCheckpointSyncThatFindsTheDiskFullWaitsForSpace(connections: Int) async throws {
        let (origin, engine) = try Self.checkpointing(connections: connections)
        defer { origin.stop() }
        _ = Self.failSync(number: 2, of: engine, errno: ENOSPC)
        let (r, done) = try await EngineLiveTests.fetch(engine, DownloadRequest(url: origin.url, connections: connections))
        #expect(done.state == .completed, "\(done)")
        #expect(try EngineLiveTests.stored(engine, r.snapshot.id) == origin.expectedBody())
        // On one connection the attempt after the failed sync resumes with an open range from a kept
        // offset. (Segmented, the prefix may have kept nothing durable: its pieces go on, the prefix from 0.)
        let gets = origin.requests(path: "/file").filter { $0.method == "GET" }
        let resumes = gets.compactMap { $0.header("If-Range") != nil ? $0.header("Range") : nil }.filter {
            $0.hasPrefix("bytes=") && $0.hasSuffix("-") && (Int64($0.dropFirst(6).dropLast()) ?? 0) > 0
        }
        #expect(connections > 1 || !resumes.isEmpty, "resumed on the durable bytes: \(gets.map { $0.header("Range") ?? "-" })")
        await engine.shutdown()
    }
}
