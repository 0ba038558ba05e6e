import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// State commits that fail (a full or failing disk under the state database): what depends on a
/// change being durable waits for it. The operator hears that its change was not recorded, files
/// are deleted only once the row that names them is gone, a verified file is not renamed into
/// place without its publishing intent, and a restart (a crash meanwhile) finds every stored row's
/// file where the row says.
@Suite(.timeLimit(.minutes(2)))
struct EngineStateFailureTests {
    /// Fails every state commit while closed (`fail`); counts the failures.
    final class Gate: Sendable {
        let closed = Mutex(false)
        let failures = Mutex(0)

        func install(on engine: DownloadEngine) {
            engine.core.stateWriter.gateCommits { [self] _ throws(StateStoreError) in
                guard closed.withLock({ $0 }) else { return }
                failures.withLock { $0 += 1 }
                throw StateStoreError(kind: .full, message: "no space left on the device (test)")
            }
        }

        func fail(_ on: Bool) { closed.withLock { $0 = on } }
    }

    /// Retries (1 s) run in real time, so a closed gate does not spin the writer.
    static func engine(_ root: URL, driver: FakeTransferDriver) throws -> (DownloadEngine, Gate) {
        let engine = try EngineFixture.engine(root, driver: driver, scheduler: EagerScheduler(upTo: 0.5))
        let gate = Gate()
        gate.install(on: engine)
        return (engine, gate)
    }

    static func completedDriver(_ body: [UInt8]) -> FakeTransferDriver {
        FakeTransferDriver { _, _ in .init(status: 200, headers: ["Content-Length": String(body.count), "ETag": "\"v1\""], body: body) }
    }

    /// Waits until everything already on the work queue ran (deletions, moves).
    static func drainWork(_ engine: DownloadEngine) {
        engine.core.workQueue.sync(flags: .barrier) {}
    }

    /// A shutdown whose final commit fails says so (the service then exits 1, not 0); one whose
    /// commits succeed says nothing.
    @Test func aShutdownWhoseFinalCommitFailsSaysSo() async throws {
        let body = EngineFixture.body(1000)
        let (engine, gate) = try Self.engine(EngineFixture.root(), driver: Self.completedDriver(body))
        _ = try engine.request(DownloadRequest(url: "http://o.test/a"))
        gate.fail(true)
        _ = try? engine.request(DownloadRequest(url: "http://o.test/b"))
        let failure = await engine.shutdown()
        #expect(failure?.contains("no space left") == true, "\(String(describing: failure))")
        let (calm, _) = try Self.engine(EngineFixture.root(), driver: Self.completedDriver(body))
        _ = try calm.request(DownloadRequest(url: "http://o.test/a"))
        #expect(await calm.shutdown() == nil)
    }

    @Test func anOperatorPauseThatCouldNotBeRecordedIsAnsweredStateUnavailable() async throws {
        let driver = FakeTransferDriver()
        let (engine, gate) = try Self.engine(EngineFixture.root(), driver: driver)
        let told = Mutex<[String?]>([])
        engine.onStateCommitHealth { failure in told.withLock { $0.append(failure) } }
        let r = try await EngineOperatorTests.transferring(engine, driver)
        let id = r.snapshot.id
        gate.fail(true)
        #expect(throws: EngineError.stateUnavailable(StateStoreError(kind: .full, message: ""), "")) {
            try engine.operatorPausing(id: id)
        }
        #expect(gate.failures.withLock { $0 } >= 1)
        #expect(engine.statistics.stateFailure?.contains("no space left") == true)
        // The hold took effect (its commit is retried): the transfer stops (its cancel is an effect
        // of the decision, which another thread draining effects may still be running).
        #expect(engine.snapshot(id: id)?.pausedBy == .operator)
        #expect(await eventually(within: 10) { driver.transfer(0).isCancelled })
        gate.fail(false)
        #expect(engine.core.stateWriter.flush())
        #expect(engine.statistics.stateFailure == nil)
        // Told once when commits began to fail (however often they were retried), once when one succeeded.
        let health = told.withLock { $0 }
        #expect(health.count == 2 && health.first??.contains("no space left") == true && health.last == .some(nil), "\(health)")
        // A handler set while commits fail already (start-up's did) is told at once.
        gate.fail(true)
        _ = try engine.request(DownloadRequest(url: "http://o.test/late"))  // a change to commit
        #expect(!engine.core.stateWriter.flush())
        let late = Mutex<[String?]>([])
        engine.onStateCommitHealth { failure in late.withLock { $0.append(failure) } }
        #expect(late.withLock { $0.count } == 1 && late.withLock { $0.first ?? nil }?.contains("no space left") == true)
        gate.fail(false)
        #expect(engine.core.stateWriter.flush())
        guard case .done(let held) = try engine.operatorPausing(id: id) else { Issue.record("not paused"); return }
        #expect(held.pausedBy == .operator)
        await engine.shutdown()
    }

    @Test func aRemovedDownloadsFilesStayUntilItsTombstoneIsCommitted() async throws {
        let body = EngineFixture.body(5000)
        let root = EngineFixture.root()
        let (engine, gate) = try Self.engine(root, driver: Self.completedDriver(body))
        let (r, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/f"), until: [.completed])
        let id = r.snapshot.id
        let file = try #require(engine.completedFile(id: id)).path
        gate.fail(true)
        #expect(throws: EngineError.self) { try engine.removing(id: id) }
        #expect(engine.snapshot(id: id) == nil)
        Self.drainWork(engine)
        #expect(FileStore.fileSize(file) == 5000, "deleted while the row naming it is still stored")
        // A crash now: a restart finds the download as stored, its file in place.
        let restarted = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let kept = try #require(restarted.completedFile(id: id))
        #expect(kept.path == file && FileStore.fileSize(kept.path) == 5000)
        await restarted.shutdown()
        // Once the tombstone is committed, the files go.
        gate.fail(false)
        #expect(engine.core.stateWriter.flush())
        try await withTimeout(20) { while FileStore.fileSize(file) != nil { try await Task.sleep(nanoseconds: 10_000_000) } }
        await engine.shutdown()
    }

    @Test func aMovedFilesOldNameStaysUntilItsNewPathIsCommitted() async throws {
        let body = EngineFixture.body(5000)
        let root = EngineFixture.root()
        let (engine, gate) = try Self.engine(root, driver: Self.completedDriver(body))
        let (r, _) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/m"), until: [.completed])
        let id = r.snapshot.id
        let cached = try #require(engine.completedFile(id: id)).path
        let moved = OneShot<String>()
        engine.core.locked { engine.core.hooks.moved = { _, path in moved.set(path ?? "") } }
        gate.fail(true)
        _ = try engine.request(DownloadRequest(url: "http://o.test/m", storage: .persistent))
        let target = try await withTimeout(20) { try await moved.value() }
        #expect(target.hasPrefix(root.appendingPathComponent("data").path))
        Self.drainWork(engine)
        #expect(FileStore.fileSize(cached) == 5000, "the old name went while the stored row still names it")
        // A crash now: the stored row still names the cache file, which is there.
        let restarted = try EngineFixture.engine(root, driver: FakeTransferDriver())
        let kept = try #require(restarted.completedFile(id: id))
        #expect(FileStore.fileSize(kept.path) == 5000)
        await restarted.shutdown()
        gate.fail(false)
        #expect(engine.core.stateWriter.flush())
        try await withTimeout(20) { while FileStore.fileSize(cached) != nil { try await Task.sleep(nanoseconds: 10_000_000) } }
        #expect(engine.completedFile(id: id)?.path == target && FileStore.fileSize(target) == 5000)
        await engine.shutdown()
    }

    @Test func aVerifiedFileIsNotPublishedWhenItsIntentCouldNotBeCommitted() async throws {
        let body = EngineFixture.body(5000)
        let root = EngineFixture.root()
        let (engine, gate) = try Self.engine(root, driver: Self.completedDriver(body))
        gate.fail(true)
        let (r, done) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/p"), until: [.completed, .failed])
        #expect(done.state == .failed && done.error?.code == .diskFull, "\(done.state) \(String(describing: done.error))")
        Self.drainWork(engine)
        let published = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("cache").path)
        #expect(published.isEmpty, "renamed into place without its intent stored: \(published)")
        // Once commits work again, asking again completes it.
        gate.fail(false)
        let (_, again) = try await EngineFixture.requestAndWait(engine, DownloadRequest(url: "http://o.test/p"), until: [.completed])
        #expect(again.id == r.snapshot.id && again.sha256 == SHA256Hasher.hex(body))
        await engine.shutdown()
    }
}
