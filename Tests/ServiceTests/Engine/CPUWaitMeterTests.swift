import Foundation
import Glibc
import Synchronization
import Testing
@testable import DownloaderEngine

/// `CPUWaitMeter`: the hash lanes' waiting for a CPU and the transfers' waiting for a buffer,
/// counted per window of wall time, tell once per window when both reach the threshold; the
/// partial file's pipeline goes through it.
@Suite struct CPUWaitMeterTests {
    /// Pieces as (end, waited for a CPU, waited for a buffer) in milliseconds; whether each one
    /// tells. Window 20 ms, threshold 1 ms.
    @Test(arguments: [
        // Both add up within a window; it tells once both reached the threshold, then not again.
        ([(1, 0.4, 0), (5, 0.7, 0), (9, 0, 0.6), (12, 0, 0.5), (13, 2, 2)], [false, false, false, true, false]),
        // Waiting for a CPU alone never tells (a fetch paced by its origin), nor for a buffer alone
        // (a fetch held back by its disk).
        ([(1, 5, 0), (2, 5, 0), (3, 9, 0)], [false, false, false]),
        ([(1, 0, 5), (2, 0, 5), (3, 0, 9)], [false, false, false]),
        // A piece ending 20 ms or more after the window's start opens the next window.
        ([(1, 0.9, 0.9), (21, 0.2, 0.2), (22, 0.9, 0.9), (30, 1, 1)], [false, false, true, false]),
        // One piece with both over the threshold tells at once; the next window tells again.
        ([(1, 1, 1), (2, 5, 5), (40, 1, 1)], [true, false, true]),
        // A clock seen going back starts afresh rather than never rolling over.
        ([(50, 0.5, 0.5), (10, 0.6, 0.6), (11, 0.4, 0.4)], [false, false, true]),
    ] as [([(Double, Double, Double)], [Bool])])
    func windowsTellOncePerWindow(pieces: [(Double, Double, Double)], tells: [Bool]) {
        var window = CPUWaitWindow(length: 20_000_000, threshold: 1_000_000)
        let told = pieces.map { window.add(at: UInt64($0.0 * 1e6), cpuWait: UInt64($0.1 * 1e6), heldBack: UInt64($0.2 * 1e6)) }
        #expect(told == tells)
    }

    @Test func defaultsAreOneMillisecondIn20() {
        let window = CPUWaitWindow()
        #expect(window.length == 20_000_000 && window.threshold == 1_000_000)
    }

    /// Clocks the test moves (the wall clock by `wallStep` per reading, the thread's CPU by
    /// `cpuStep`), and a meter on them that counts its words in `told`.
    final class Clocks: Sendable {
        let wall = Atomic<UInt64>(1_000_000_000), cpu = Atomic<UInt64>(0), told = Atomic<Int>(0)
        let wallStep: UInt64, cpuStep: UInt64
        init(wallStep: UInt64, cpuStep: UInt64) { (self.wallStep, self.cpuStep) = (wallStep, cpuStep) }
        var count: Int { told.load(ordering: .relaxed) }
        func meter(window: CPUWaitWindow = CPUWaitWindow()) -> CPUWaitMeter {
            CPUWaitMeter(window: window, onWaiting: { self.told.add(1, ordering: .relaxed) },
                         monotonic: { self.wall.add(self.wallStep, ordering: .relaxed).newValue },
                         threadCPU: { self.cpu.add(self.cpuStep, ordering: .relaxed).newValue })
        }
    }

    @Test func hashingThatRanAllItsTimeNeverTells() {
        let clocks = Clocks(wallStep: 3_000_000, cpuStep: 3_000_000)
        let meter = clocks.meter()
        for _ in 0..<20 {
            #expect(meter.timed { 7 } == 7)
            meter.heldBack(since: meter.monotonic())
        }
        #expect(clocks.count == 0)
    }

    @Test func hashingThatWaitedBesideATransferHeldBackTellsOncePerWindow() {
        // Each hashing: 3 ms of wall time, 1 ms of CPU: 2 ms waiting. Each wait for a buffer:
        // 3 ms. The wall clock moves 3 ms per reading: a round of both ends 12 ms after the
        // previous one, so rounds one and two share a window, round three opens the next.
        let clocks = Clocks(wallStep: 3_000_000, cpuStep: 1_000_000)
        let meter = clocks.meter()
        for _ in 0..<3 {
            meter.timed {}
            meter.heldBack(since: meter.monotonic())
        }
        #expect(clocks.count == 2)
    }

    /// The partial file's pipeline: its hashing is timed, and so are its owner's waits for a free
    /// buffer while the write lane is slow (each write takes 20 ms: four buffers are soon out).
    @Test func thePartialFilesPipelineIsTimed() throws {
        let path = EngineFixture.root().appendingPathComponent("m.part").path
        let clocks = Clocks(wallStep: 2_000_000, cpuStep: 0)
        let slowWrite: PartialFile.WriteCall = { fd, bytes, count, at in
            usleep(20_000)
            return Glibc.pwrite(fd, bytes, count, at)
        }
        let file = try PartialFile(path: path, keep: 0, write: slowWrite)
        file.measureWaits(clocks.meter(window: CPUWaitWindow(length: .max, threshold: 1_000_000)))
        let body = EngineFixture.body(8 * PartialFile.bufferSize)
        try body.withUnsafeBytes { try file.append($0) }
        try file.sync()
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        #expect(clocks.count == 1)
        _ = file.close()
    }
}
