import Foundation
import Testing
@testable import DownloaderEngine

/// A download whose record was replaced by a later one of the same id (cluster mode: the lease
/// was lost, the download evicted, then adopted again; done here by hand as `adopt` does): the
/// new record counts its attempts from 1 again, and the old record's attempt, still running, must
/// never pass for the new one's.
@Suite(.timeLimit(.minutes(1)))
struct EngineReplacedRecordTests {
    /// Evicts download `id` and holds it again under a new record made from its row (what a lost
    /// lease, then an adoption, do); it carries on for its stored callers.
    static func replace(_ id: String, in engine: DownloadEngine) {
        let core = engine.core
        core.decide {
            guard let old = core.byID[id] else { return }
            core.evict(old)
            let again = DownloadRecord(stored: old.stored(), tau: 1, progressInterval: 0.05)
            core.byID[id] = again
            core.byURL[again.key] = again
            for token in again.tokens { core.tokens[token] = id }
            core.handle(.recovered(callers: again.tokens.count), for: again)
        }
    }

    @Test func anAttemptOfAReplacedRecordNeverEndsTheNewRecordsAttempt() async throws {
        let body = EngineFixture.body(1000)
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let first = try engine.request(DownloadRequest(url: EngineSettlingJoinTests.url))
        let id = first.snapshot.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let core = engine.core
        Self.replace(id, in: engine)
        try await withTimeout(20) { await driver.waitForStarts(2) }
        let serials = core.locked { (core.byID[id]?.attempt?.serial, core.byID[id]?.lifecycle.attempt?.serial) }
        #expect(serials.0 == 1 && serials.1 == 1, "the new record's first attempt: \(serials)")
        // The old attempt's transfer ends (its decision is taken before `fail` returns): nothing
        // of the new record's attempt changes.
        driver.transfer(0).fail(.connection, "cut")
        #expect(core.locked { core.byID[id]?.lifecycle.attempt?.stage } == .starting)
        #expect(!driver.transfer(1).isCancelled)
        #expect(driver.transfer(1).respond(200, ["ETag": "\"v1\"", "Content-Length": "\(body.count)"]))
        try driver.transfer(1).send(body)
        driver.transfer(1).finish()
        let done = try await withTimeout(10) { try await EngineFixture.waitFor(engine, id: id, [.completed, .failed]) }
        #expect(done.state == .completed, "\(String(describing: done.error))")
        await engine.shutdown()
    }
}

extension EngineReplacedRecordTests {
    /// A streaming reader of the old record that leaves late takes nothing from the new record's
    /// readers (before, it was found by id: the new record's only reader counted as gone, and the
    /// download paused under it).
    @Test func aReaderOfAReplacedRecordLeavingLeavesTheNewRecordsReaders() async throws {
        let driver = FakeTransferDriver()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver)
        let old = try engine.attachReader(DownloadRequest(url: EngineSettlingJoinTests.url))
        let id = old.id
        try await withTimeout(20) { await driver.waitForStarts(1) }
        let core = engine.core
        Self.replace(id, in: engine)
        let reader = try engine.attachReader(DownloadRequest(url: EngineSettlingJoinTests.url))
        #expect(reader.id == id)
        old.close()
        #expect(core.locked { core.byID[id]?.readers } == 1)
        #expect(engine.snapshot(id: id)?.state != .paused)
        reader.close()
        #expect(engine.snapshot(id: id)?.state == .paused)
        await engine.shutdown()
    }
}
