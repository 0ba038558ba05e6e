import Basics
import Foundation
import Synchronization
import Testing
@testable import MiniHTTPServer

/// `BulkLoopYield` and `DutyCycle`: while the application asks them to give way, bulk loops sleep
/// after each millisecond of CPU long enough to keep their share; otherwise they never sleep.
@Suite struct BulkLoopYieldTests {
    @Test(arguments: [(0.2, 4_000_000), (0.5, 1_000_000), (1.0, 0), (0.001, 99_000_000), (7.0, 0)] as [(Double, UInt64)])
    func restKeepsTheShare(share: Double, rest: UInt64) {
        #expect(DutyCycle(share: share).rest == rest)
    }

    /// Steps as (asked, the loop's CPU in ms); what each returns (the rest in ms, or nil). A rest
    /// is taken by the caller, which then calls `rested` with the CPU after it.
    @Test(arguments: [
        // Not asked: never rests, whatever the CPU used.
        ([(false, 0.0), (false, 5), (false, 50)], [Double?.none, nil, nil]),
        // Asked: the first step marks; a millisecond of CPU after the mark rests.
        ([(true, 10.0), (true, 10.6), (true, 11.0), (true, 11.5)], [nil, nil, 4, nil]),
        // No longer asked clears the mark: asked again, it counts afresh.
        ([(true, 0.0), (false, 0.9), (true, 5), (true, 5.5), (true, 6.2)], [nil, nil, nil, nil, 4]),
    ] as [([(Bool, Double)], [Double?])])
    func restsAfterEachMillisecondWhileAsked(steps: [(Bool, Double)], rests: [Double?]) {
        var cycle = DutyCycle(share: 0.2)
        var got: [Double?] = []
        for (asked, cpu) in steps {
            let nanoseconds = UInt64(cpu * 1e6)
            let rest = cycle.step(asked: asked, cpu: { nanoseconds })
            got.append(rest.map { Double($0) / 1e6 })
            if rest != nil { cycle.rested(cpu: nanoseconds) }
        }
        #expect(got == rests)
    }

    @Test func aRequestHoldsForItsSecondsAndALaterOneExtendsIt() {
        let yield = BulkLoopYield(share: 0.2)
        let now = monotonicNanoseconds()
        #expect(!yield.isRequested(at: now))
        yield.request(seconds: 30)
        #expect(yield.isRequested(at: now + 29_000_000_000))
        #expect(!yield.isRequested(at: now + 31_000_000_000 + 1_000_000_000))
        yield.request(seconds: 1)  // shorter: the longer request stands
        #expect(yield.isRequested(at: now + 29_000_000_000))
        yield.request(seconds: 60)
        #expect(yield.isRequested(at: now + 59_000_000_000))
    }

    /// Counts the rests a bulk loop takes (on which thread, how long), and moves the loop's CPU
    /// clock by 0.4 ms per reading instead of reading it.
    final class Recorder: Sendable {
        let rests = Mutex<[(thread: Int32, nanoseconds: UInt64)]>([])
        let cpu = Atomic<UInt64>(0)
        func yield() -> BulkLoopYield {
            BulkLoopYield(share: 0.2, sleep: { ns in self.rests.withLock { $0.append((ThreadNice.currentThreadID, ns)) } },
                          threadCPU: { self.cpu.add(400_000, ordering: .relaxed).newValue })
        }
    }

    /// A push stream fed `pieces` times through `wake` (each a closure handed to the bulk loop);
    /// the threads its source ran on.
    static func stream(pieces: Int, yield: BulkLoopYield, asked: Bool) async throws -> [Int32] {
        let source = BulkLoopTests.ThreadRecordingSource()
        try await BulkLoopTests.withBulkServer(source: source, yield: yield) { port, _, bulk, _ in
            if asked { yield.request(seconds: 60) }
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send(get("/push"))
            _ = try await client.readResponseHead()
            _ = try await source.attached.value()
            for i in 0..<pieces {
                source.feed([UInt8(i)])
                #expect(try await client.readChunk() == [UInt8(i)])
            }
            source.feed([], finish: true)
            #expect(try await client.readChunk() == nil)
        }
        return source.threadsSeen.sorted()
    }

    @Test func aBulkLoopAskedToGiveWayRestsAfterItsShare() async throws {
        let recorder = Recorder()
        let bulk = try await Self.stream(pieces: 12, yield: recorder.yield(), asked: true)
        let rests = recorder.rests.withLock { $0 }
        // Twelve wakes and their sends, 0.4 ms of "CPU" per reading: a rest every few pieces.
        #expect(rests.count >= 2)
        #expect(rests.allSatisfy { $0.nanoseconds == 4_000_000 })
        #expect(Set(rests.map(\.thread)) == Set(bulk))
    }

    @Test func aBulkLoopNotAskedNeverRests() async throws {
        let recorder = Recorder()
        _ = try await Self.stream(pieces: 12, yield: recorder.yield(), asked: false)
        #expect(recorder.rests.withLock { $0.isEmpty })
        #expect(recorder.cpu.load(ordering: .relaxed) == 0)  // nor reads its CPU clock
    }
}
