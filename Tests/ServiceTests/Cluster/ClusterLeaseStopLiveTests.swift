import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// A replica's own lease that stopped (its deadline passed before a renewal came back; the keeper
/// stops it as here) while its row in the database has not expired yet: the replica takes it again
/// at once under a higher epoch, and a new download never starts without its lease.
@Suite(.enabled(if: PostgresServer.isInstalled, "needs PostgreSQL (scripts/setup installs it)"), .timeLimit(.minutes(2)))
struct ClusterLeaseStopLiveTests {
    /// Leases of 10 s (the default): the stopped lease's row stays unexpired through each test.
    static let ttl: Double = 10

    /// Holds `engine`'s seeding of download `id` (the copy of a takeover) until `release` is
    /// signalled (20 s at most); `copying` is signalled once the copy began.
    static func holdSeeding(_ engine: DownloadEngine, of id: String) -> (copying: DispatchSemaphore, release: DispatchSemaphore) {
        let copying = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        engine.core.locked {
            engine.core.hooks.seeding = { seeded in
                guard seeded == id else { return }
                copying.signal()
                _ = release.wait(timeout: .now() + 20)
            }
        }
        return (copying, release)
    }

    /// One `engine.request` for `url` on a thread of its own, asked outside any lock (a reader of
    /// its answer never waits for the request); `answered` is signalled once it returned.
    final class Asked: Sendable {
        let answered = DispatchSemaphore(value: 0)
        private let answer = Mutex<(done: Bool, id: String?)>((false, nil))

        init(_ engine: DownloadEngine, _ url: String) {
            Thread { [self] in
                let id = (try? engine.request(DownloadRequest(url: url)))?.snapshot.id
                answer.withLock { $0 = (true, id) }
                answered.signal()
            }.start()
        }

        var done: Bool { answer.withLock { $0.done } }
        /// The download the request joined or started; nil until it returned, or when refused.
        var id: String? { answer.withLock { $0.id } }
    }

    /// Replica `a` fetched part of `origin`'s file (a checkpoint reached the lease row), its caller
    /// left, and it let the paused download go: the next replica to act on it adopts it.
    static func pausedOnA(_ c: BlockingChecks, _ database: String, _ origin: TestOrigin, _ a: DownloadEngine) throws -> Enqueued {
        let first = try a.request(DownloadRequest(url: origin.url))
        try c.expect(try ClusterLeaseLiveTests.wait(10) { (try ClusterLeaseLiveTests.leaseRow(database)?.durable ?? 0) >= 128 << 10 },
                     "a checkpoint reached the lease row")
        c.expect(a.cancel(token: first.token)?.state == .paused)
        try c.expect(try ClusterLeaseLiveTests.wait(5) { try ClusterLeaseLiveTests.letGo(a, database) }, "a lets it go")
        return first
    }

    /// What the keeper does with a lease whose deadline passed.
    static func stop(_ hold: LeaseHold, on engine: DownloadEngine) {
        if hold.stop() { engine.core.leaseStopped(hold) }
    }

    @Test func aJoinWhoseNewLeaseStoppedBeforeItStartsTakesTheLeaseAgain() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: Self.ttl) { c, database, origin, a, _ in
            let stops = Mutex(0)
            a.core.locked {
                a.core.hooks.leasePrepared = { name in
                    guard stops.withLock({ $0 += 1; return $0 }) == 1, let cluster = a.core.cluster,
                          let hold = a.core.locked({ cluster.pending[name] }) else { return }
                    Self.stop(hold, on: a)
                }
            }
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            c.expect(stops.withLock { $0 } == 2, "prepared twice")
            let epoch = a.core.locked { a.core.byID[id]?.lease.map { ($0.epoch, $0.isStopped) } }
            c.expect(epoch?.0 == 2 && epoch?.1 == false, "the download runs under a live lease of epoch 2: \(String(describing: epoch))")
            try c.expect(try ClusterLeaseLiveTests.leaseRow(database)?.epoch == 2)
            c.expect(ClusterLeaseLiveTests.wait(20) { a.snapshot(id: id)?.state == .completed }, "and completes")
            c.expect(origin.getCount() == 1)
        }
    }

    @Test func aRequestAfterTheReplicasOwnLeaseStoppedTakesItAgainAndResumes() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: Self.ttl) { c, database, origin, a, _ in
            let id = try a.request(DownloadRequest(url: origin.url)).snapshot.id
            try c.expect(try ClusterLeaseLiveTests.wait(10) { (try ClusterLeaseLiveTests.leaseRow(database)?.durable ?? 0) >= 128 << 10 },
                         "a checkpoint reached the lease row")
            let hold = try c.require(a.core.locked { a.core.byID[id]?.lease })
            Self.stop(hold, on: a)
            c.expect(a.core.locked { a.core.byID[id] } == nil, "evicted")
            do throws(EngineError) {
                let again = try a.request(DownloadRequest(url: origin.url))
                c.expect(again.snapshot.id == id, "the same download")
            } catch {
                c.expect(false, "refused, naming \(error.ownerURL ?? "-"): \(error)")
            }
            try c.expect(try ClusterLeaseLiveTests.leaseRow(database)?.epoch == 2)
            c.expect(ClusterLeaseLiveTests.wait(20) { a.snapshot(id: id)?.state == .completed }, "completes")
            c.expect(origin.getCount() == 2, "resumed once: \(origin.getCount())")
            let file = try c.require(a.completedFile(id: id))
            try c.expect(Array(try Data(contentsOf: URL(fileURLWithPath: file.path))) == origin.expectedBody())
        }
    }

    /// Seeding the new epoch's partial copies the previous one, which for a large file takes longer
    /// than a lease lasts (here stretched by a hook past the 2 s lease): the lease is renewed all the
    /// while, so the download resumes from what was durable and its new caller is kept.
    @Test func aTakeoverWhoseSeedingOutlastsTheLeaseKeepsItAndResumes() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: 2) { c, database, origin, a, b in
            let first = try Self.pausedOnA(c, database, origin, a)
            let id = first.snapshot.id
            b.core.locked { b.core.hooks.seeding = { _ in usleep(3_000_000) } }
            let second = try b.request(DownloadRequest(url: origin.url))
            c.expect(second.snapshot.id == id)
            c.expect(b.statistics.cluster?.fencedWrites == 0, "the lease held through the seeding")
            c.expect(ClusterLeaseLiveTests.wait(20) { b.snapshot(id: id)?.state == .completed }, "completes on b")
            c.expect((try? a.core.cluster?.store.downloadID(ofToken: TokenHash(token: second.token))) == id, "b's caller is in the database")
            let range = origin.requests(path: "/file").filter { $0.method == "GET" }.last?.header("Range") ?? "none"
            c.expect(range.hasPrefix("bytes=") && range != "bytes=0-", "resumed: \(range)")
            c.expect(b.completedFile(id: id).map { (try? Data(contentsOf: URL(fileURLWithPath: $0.path))).map(Array.init) == origin.expectedBody() }
                     ?? false, "byte-identical")
        }
    }

    /// A takeover holds the adoption lock while it copies the previous epoch's partial (minutes
    /// for a large file on a volume without server-side copy): a request for a download this
    /// replica already has joins it meanwhile instead of waiting for the copy.
    @Test func aJoinOfADownloadAlreadyHereDoesNotWaitForATakeoversCopy() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: 2) { c, database, origin, a, b in
            origin.addResource(path: "/other", size: 3 << 20)
            let first = try Self.pausedOnA(c, database, origin, a)
            let other = try b.request(DownloadRequest(url: origin.url("/other")))  // Live on b (the origin is throttled).
            let (copying, release) = Self.holdSeeding(b, of: first.snapshot.id)
            let taking = Asked(b, origin.url)
            defer { release.signal(); _ = taking.answered.wait(timeout: .now() + 30) }
            c.expect(copying.wait(timeout: .now() + 20) == .success, "b took the paused download over and is copying")
            let join = Asked(b, origin.url("/other"))
            c.expect(join.answered.wait(timeout: .now() + 10) == .success, "the join waited for the takeover's copy")
            c.expect(join.id == other.snapshot.id)
        }
    }

    /// A takeover holds its own key's adoption lock while it copies the previous epoch's partial:
    /// a request for a new URL on that replica (another key) answers meanwhile instead of waiting
    /// for the copy (it used to: one adoption lock for the whole replica), and the held takeover
    /// still adopts the download and completes it once its copy is let go.
    @Test func aRequestForANewURLDoesNotWaitForATakeoversCopy() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: 2) { c, database, origin, a, b in
            origin.addResource(path: "/new", size: 3 << 20)
            let first = try Self.pausedOnA(c, database, origin, a)
            let (copying, release) = Self.holdSeeding(b, of: first.snapshot.id)
            let taking = Asked(b, origin.url)
            defer {
                // On an early exit: the copy is let go and the takeover's request awaited.
                if !taking.done {
                    release.signal()
                    _ = taking.answered.wait(timeout: .now() + 30)
                }
            }
            c.expect(copying.wait(timeout: .now() + 20) == .success, "b took the paused download over and is copying")
            let asked = Asked(b, origin.url("/new"))
            c.expect(asked.answered.wait(timeout: .now() + 10) == .success, "the new URL's request waited for the takeover's copy")
            let fresh = asked.id
            c.expect(fresh != nil && fresh != first.snapshot.id, "a new download: \(fresh ?? "refused")")
            c.expect(!taking.done, "the takeover was still copying meanwhile")
            release.signal()
            c.expect(taking.answered.wait(timeout: .now() + 20) == .success, "the takeover's request answered once its copy was let go")
            c.expect(taking.id == first.snapshot.id, "the takeover adopted the paused download")
            c.expect(ClusterLeaseLiveTests.wait(20) { b.snapshot(id: first.snapshot.id)?.state == .completed }, "and completes on b")
            c.expect(b.statistics.cluster?.fencedWrites == 0, "its lease held throughout")
        }
    }

    /// The holder dies between the rename of the verified file and the commit of its completion
    /// (its publishing intent was committed first): the replica that takes the lease over finds
    /// the file in place and adopts the download as completed, nothing fetched again. It used to
    /// fetch the whole file a second time.
    @Test func aTakeoverAdoptsAFilePublishedByAHolderThatDiedBeforeItsCompletion() async throws {
        try await ClusterLeaseLiveTests.withReplicas { c, database, origin, a, b in
            origin.addResource(path: "/small", size: 64 << 10)
            a.core.locked { a.core.hooks.afterPublishRename = { a.core.clusterAbandonForTests() } }
            let id = try a.request(DownloadRequest(url: origin.url("/small"))).snapshot.id
            c.expect(ClusterLeaseLiveTests.wait(20) { b.statistics.cluster?.takeovers ?? 0 >= 1 }, "b took the lease over")
            c.expect(ClusterLeaseLiveTests.wait(10) { b.snapshot(id: id)?.state == .completed }, "completed on b")
            try c.expect(try ClusterLeaseLiveTests.wait(10) { try ClusterLeaseLiveTests.state(of: id, database) == "completed" }, "and recorded so")
            c.expect(origin.requests(path: "/small").filter { $0.method == "GET" }.count == 1, "fetched once")
            let file = try c.require(b.completedFile(id: id))
            c.expect((try? Data(contentsOf: URL(fileURLWithPath: file.path))).map(Array.init) == origin.expectedBody(path: "/small"),
                     "the published file, byte-identical")
        }
    }

    /// A seed of the kept bytes that finds no room (ENOSPC: a full shared volume, here made so by
    /// a hook) adopts nothing: a request is refused for now (`busy`), the previous partial and the
    /// lease row stay as they were, and once there is room the next request resumes from them.
    /// It used to go on from 0 and delete the kept bytes. A removal needs no bytes: it goes on.
    @Test func aSeedWithoutRoomKeepsTheBytesAndRefusesForNow() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: 2) { c, database, origin, a, b in
            let first = try Self.pausedOnA(c, database, origin, a)
            let id = first.snapshot.id
            let before = try c.require(try ClusterLeaseLiveTests.leaseRow(database))
            let previous = b.core.store.partialDirectory + "/" + (before.partFile ?? "-")
            let kept = try c.require(FileStore.fileSize(previous))
            let full = Atomic(true)
            b.core.locked { b.core.hooks.seedFailure = { _ in full.load(ordering: .relaxed) ? ENOSPC : nil } }
            do throws(EngineError) {
                _ = try b.request(DownloadRequest(url: origin.url))
                c.expect(false, "adopted without its bytes")
            } catch {
                c.expect(error.code == .busy, "\(error)")
            }
            c.expect(FileStore.fileSize(previous) == kept, "the kept bytes stay")
            try c.expect(try ClusterLeaseLiveTests.leaseRow(database)?.partFile == before.partFile, "the lease row still names them")
            c.expect(b.snapshot(id: id)?.state == .paused, "left as it was")

            full.store(false, ordering: .relaxed)
            let gets = origin.getCount()
            let second = try b.request(DownloadRequest(url: origin.url))
            c.expect(second.snapshot.id == id)
            c.expect(ClusterLeaseLiveTests.wait(20) { b.snapshot(id: id)?.state == .completed }, "completes on b")
            let resumed = origin.requests(path: "/file").filter { $0.method == "GET" }.dropFirst(gets).first?.header("Range") ?? "none"
            c.expect(resumed.hasPrefix("bytes=") && resumed != "bytes=0-", "resumed from the kept bytes: \(resumed)")
        }
    }

    /// The operator removes a paused download to free a full shared volume: its kept bytes are
    /// not copied (no room, and no need), the removal goes on.
    @Test func aRemovalNeedsNoRoomForTheKeptBytes() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: 2) { c, database, origin, a, b in
            let first = try Self.pausedOnA(c, database, origin, a)
            let id = first.snapshot.id
            let seeds = Atomic(0)
            b.core.locked { b.core.hooks.seedFailure = { _ in seeds.add(1, ordering: .relaxed); return ENOSPC } }
            do throws(EngineError) {
                let removed = try b.removing(id: id)
                c.expect(removed?.id == id)
            } catch {
                c.expect(false, "the removal was refused: \(error)")
            }
            c.expect(seeds.load(ordering: .relaxed) == 0, "nothing was copied to be deleted")
            let store = try PostgresStateStore(pool: PostgresPool(url: database, capacity: 1))
            try c.expect(store.load(id: id) == nil, "removed")
        }
    }

    /// A takeover seeds its own partial from the previous epoch's; the previous one is what the
    /// lease row names until the new holder's first commit checkpoints the new one, so it stays
    /// until then (here: while the new holder's state commits fail): a crash in between resumes
    /// from it rather than from 0.
    @Test func aTakeoverKeepsThePreviousPartialUntilTheLeaseRowNamesItsOwn() async throws {
        try await ClusterLeaseLiveTests.withReplicas(ttl: Self.ttl) { c, database, origin, a, b in
            let first = try Self.pausedOnA(c, database, origin, a)
            let previous = try c.require(try ClusterLeaseLiveTests.leaseRow(database)?.partFile)
            let path = b.core.store.partialDirectory + "/" + previous
            c.expect(FileStore.fileSize(path) != nil, "a's partial is there")
            let failing = Atomic(true)
            b.core.stateWriter.gateCommits { _ throws(StateStoreError) in
                if failing.load(ordering: .relaxed) { throw StateStoreError(kind: .other, message: "test: commits fail") }
            }
            let second = try b.request(DownloadRequest(url: origin.url))
            c.expect(second.snapshot.id == first.snapshot.id)
            b.core.workQueue.sync(flags: .barrier) {}
            c.expect(FileStore.fileSize(path) != nil, "the previous partial went before the lease row named another")
            try c.expect(try ClusterLeaseLiveTests.leaseRow(database)?.partFile == previous)
            failing.store(false, ordering: .relaxed)
            c.expect(b.core.stateWriter.flush())
            c.expect(ClusterLeaseLiveTests.wait(10) { FileStore.fileSize(path) == nil }, "and goes once it does")
            try c.expect(try ClusterLeaseLiveTests.leaseRow(database)?.partFile != previous)
            c.expect(ClusterLeaseLiveTests.wait(20) { b.snapshot(id: first.snapshot.id)?.state == .completed }, "completes on b")
        }
    }
}
