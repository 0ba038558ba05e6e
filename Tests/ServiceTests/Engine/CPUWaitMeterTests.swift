import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// `CPUWaitMeter`: the hash lanes' waiting for a CPU, counted per window of wall time, tells once
/// per window when it reaches the threshold; the partial file's hash lane goes through it.
@Suite struct CPUWaitMeterTests {
    /// Pieces of work as (end, waited) in milliseconds; whether each one tells. Window 20 ms,
    /// threshold 1 ms.
    @Test(arguments: [
        // Waiting adds up within a window and tells once it reaches the threshold, then not again.
        ([(1, 0.4), (5, 0.4), (9, 0.3), (12, 0.9)], [false, false, true, false]),
        // A piece ending 20 ms or more after the window's start opens the next window.
        ([(1, 0.9), (21, 0.2), (22, 0.9), (30, 1.0)], [false, false, true, false]),
        // One piece waiting the whole threshold tells at once; the next window tells again.
        ([(1, 1.0), (2, 5.0), (40, 1.0)], [true, false, true]),
        // A clock seen going back starts afresh rather than never rolling over.
        ([(50, 0.5), (10, 0.6), (11, 0.4)], [false, false, true]),
    ] as [([(Double, Double)], [Bool])])
    func windowsTellOncePerWindow(pieces: [(Double, Double)], tells: [Bool]) {
        var window = CPUWaitWindow(length: 20_000_000, threshold: 1_000_000)
        let told = pieces.map { window.add(at: UInt64($0.0 * 1e6), waited: UInt64($0.1 * 1e6)) }
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
        func meter() -> CPUWaitMeter {
            CPUWaitMeter(onWaiting: { self.told.add(1, ordering: .relaxed) },
                         monotonic: { self.wall.add(self.wallStep, ordering: .relaxed).newValue },
                         threadCPU: { self.cpu.add(self.cpuStep, ordering: .relaxed).newValue })
        }
    }

    @Test func workThatRanAllItsTimeNeverTells() {
        let clocks = Clocks(wallStep: 3_000_000, cpuStep: 3_000_000)
        let meter = clocks.meter()
        for _ in 0..<20 { #expect(meter.timed { 7 } == 7) }
        #expect(clocks.count == 0)
    }

    @Test func workThatWaitedTellsOncePerWindow() {
        // Each piece: 3 ms of wall time, 1 ms of CPU: 2 ms waiting, over the threshold at once.
        // The wall clock moves 3 ms per reading, so the pieces end 6 ms apart: the first four in
        // the window the first one opened, the fifth in the next.
        let clocks = Clocks(wallStep: 3_000_000, cpuStep: 1_000_000)
        let meter = clocks.meter()
        for _ in 0..<5 { meter.timed {} }
        #expect(clocks.count == 2)
    }

    @Test func thePartialFilesHashLaneIsTimed() throws {
        let path = EngineFixture.root().appendingPathComponent("m.part").path
        let clocks = Clocks(wallStep: 5_000_000, cpuStep: 0)
        let file = try PartialFile(path: path, keep: 0)
        file.measureHashing(clocks.meter())
        let body = EngineFixture.body(2 * PartialFile.bufferSize)
        try body.withUnsafeBytes { try file.append($0) }
        try file.sync()
        #expect(file.sha256Hex == SHA256Hasher.hex(body))
        #expect(clocks.count >= 1)
        _ = file.close()
    }
}
