import Foundation
import Synchronization
import Testing
@testable import DownloadService
@testable import DownloaderEngine

/// A `/fetch` reader that opens the file for the first time while the verified file is being
/// renamed into its area: the partial's path names nothing any more and the completion is not
/// recorded yet. It must still find the file (it was aborted at byte 0, "closed inside the body",
/// 1–3 of 1 000 readers in bench section 9).
@Suite(.timeLimit(.minutes(1)))
struct FetchPublishingWindowTests {
    @Test func aReaderFindsTheFileBetweenTheRenameAndTheCompletion() async throws {
        let driver = FakeTransferDriver()
        let recorder = StoryRecorder()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.storyteller = recorder.tell }
        let body = EngineFixture.body(40_000)
        let reader = try engine.attachReader(DownloadRequest(url: "http://o.test/window.bin"))
        defer { reader.close() }
        // In the window: what the reader's state says, and whether a first open finds this version.
        let seen = Mutex<(TailState, opened: Bool)?>(nil)
        engine.core.locked {
            engine.core.hooks.afterPublishRename = {
                let state = reader.state
                let opened = FetchStream.candidatePaths(state, newest: reader.state).contains { path in
                    let fd = open(path, O_RDONLY | O_CLOEXEC)
                    guard fd >= 0 else { return false }
                    defer { close(fd) }
                    var st = stat()
                    guard fstat(fd, &st) == 0, let file = state.file else { return false }
                    return UInt64(st.st_dev) == file.device && UInt64(st.st_ino) == file.inode
                }
                seen.withLock { $0 = (state, opened) }
            }
        }
        try await withTimeout(5) { await driver.waitForStarts(1) }
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        try driver.transfer(0).send(body)
        driver.transfer(0).finish()
        let story = try await recorder.wait(for: reader.id) { $0.isEnd }
        #expect(story.last?.name == "completed")
        let window = try #require(seen.withLock { $0 })
        // A reader may send bytes then (the file is whole, only its last byte waits for the verdict)...
        #expect(window.0.phase == .flowing && window.0.available == 40_000)
        // ...so it must be able to open the file: not at the partial's path (renamed away).
        #expect(window.opened, "no path of \(window.0) opens this version's file")
        #expect(!FileManager.default.fileExists(atPath: window.0.path))
    }

    /// What a reader's patience watches besides the bytes it can read: landings grow with every
    /// write (a segment's too, beyond the prefix it follows), and the attempt's final checks show
    /// as finishing, so a verification or commit slower than the stall timeout aborts no reader.
    @Test func aReaderSeesLandingsAndTheFinalChecksAsLife() async throws {
        let driver = FakeTransferDriver()
        let recorder = StoryRecorder()
        let engine = try EngineFixture.engine(EngineFixture.root(), driver: driver) { $0.storyteller = recorder.tell }
        let reader = try engine.attachReader(DownloadRequest(url: "http://o.test/life.bin"))
        defer { reader.close() }
        let during = Mutex<TailLiveness?>(nil)
        engine.core.locked { engine.core.hooks.beforePublishRename = { during.withLock { $0 = reader.liveness } } }
        try await withTimeout(5) { await driver.waitForStarts(1) }
        #expect(reader.liveness == TailLiveness(landings: 0, finishing: false))
        #expect(driver.transfer(0).respond(200, ["Content-Length": "40000", "ETag": "\"v1\""]))
        try driver.transfer(0).send(EngineFixture.body(20_000))
        let first = reader.liveness.landings
        #expect(first > 0 && !reader.liveness.finishing)
        try driver.transfer(0).send(Array(EngineFixture.body(40_000)[20_000...]))
        #expect(reader.liveness.landings > first)
        driver.transfer(0).finish()
        let story = try await recorder.wait(for: reader.id) { $0.isEnd }
        #expect(story.last?.name == "completed")
        #expect(during.withLock { $0 }?.finishing == true, "finishing while the file is verified and published")
        #expect(!reader.liveness.finishing)
    }
}
