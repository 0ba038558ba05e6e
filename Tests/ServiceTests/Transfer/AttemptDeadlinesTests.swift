@testable import DownloaderEngine
import Testing

/// The connect, head and stall timers of one attempt, on made-up monotonic times.
@Suite struct AttemptDeadlinesTests {
    static let second: UInt64 = 1_000_000_000

    static func deadlines() -> AttemptDeadlines {
        AttemptDeadlines(connectTimeout: 10, headTimeout: 30, stallTimeout: 5, startedAt: 100 * second)
    }

    @Test func connectingIsLibcurlsUntilABackstopOneSecondLater() {
        let d = Self.deadlines()
        #expect(d.check(now: 110 * Self.second) == .runningUntil(111 * Self.second))
        #expect(d.check(now: 111 * Self.second) == .expired(.connectTimeout, seconds: 10))
    }

    @Test func anOwnLookupHasNoBackstop() {
        var d = Self.deadlines()
        d.connecting(at: 100 * Self.second, ownLookup: true)
        #expect(d.check(now: 110 * Self.second) == .expired(.connectTimeout, seconds: 10))
    }

    @Test func theHeadTimeoutIsATotalThatActivityDoesNotExtend() {
        var d = Self.deadlines()
        d.requestSent(at: 102 * Self.second)
        for t in stride(from: 103, to: 132, by: 1) { d.activity(at: UInt64(t) * Self.second) }  // A trickling head.
        #expect(d.check(now: 131 * Self.second) == .runningUntil(132 * Self.second))
        #expect(d.check(now: 132 * Self.second) == .expired(.headTimeout, seconds: 30))
    }

    @Test func afterTheFinalHeadOnlyQuietCounts() {
        var d = Self.deadlines()
        d.requestSent(at: 102 * Self.second)
        d.headEnded(at: 120 * Self.second, final: true)
        #expect(d.check(now: 124 * Self.second) == .runningUntil(125 * Self.second))
        d.activity(at: 124 * Self.second)
        #expect(d.check(now: 128 * Self.second) == .runningUntil(129 * Self.second))
        #expect(d.check(now: 129 * Self.second) == .expired(.stalled, seconds: 5))
    }

    @Test func aFollowedRedirectConnectsAgainThenWaitsForItsOwnHead() {
        var d = Self.deadlines()
        d.requestSent(at: 101 * Self.second)
        d.headEnded(at: 125 * Self.second, final: false)
        #expect(d.phase == .connecting(since: 125 * Self.second, grace: AttemptDeadlines.connectGrace))
        d.requestSent(at: 126 * Self.second)
        #expect(d.check(now: 155 * Self.second) == .runningUntil(156 * Self.second))
    }

    /// `--min-speed` 1 000 bytes/s over windows of the stall timeout (5 s): judged at the first
    /// activity once a window is whole; a window fast enough starts the next one there.
    @Test(arguments: [
        // (bytes by the first activity past the window, verdict then)
        (Int64(6_000), AttemptDeadlines.Verdict.runningUntil(131 * AttemptDeadlinesTests.second)),
        (Int64(5_999), .tooSlow(bytesPerSecond: 5_999 / 6)),
    ])
    func aTrickleIsTooSlowOnceAWholeWindowFellShort(received: Int64, then verdict: AttemptDeadlines.Verdict) {
        var d = AttemptDeadlines(connectTimeout: 10, headTimeout: 30, stallTimeout: 5, minSpeed: 1_000, startedAt: 100 * Self.second)
        d.requestSent(at: 101 * Self.second)
        d.headEnded(at: 120 * Self.second, final: true)
        d.activity(at: 124 * Self.second, received: 10)  // Within the window: not judged yet.
        #expect(d.check(now: 124 * Self.second) == .runningUntil(129 * Self.second))
        d.activity(at: 126 * Self.second, received: received)  // 6 s: the window is whole.
        #expect(d.check(now: 126 * Self.second) == verdict)
        if case .runningUntil = verdict {
            d.activity(at: 130 * Self.second, received: received + 10)  // The next window began at 126.
            #expect(d.check(now: 130 * Self.second) == .runningUntil(135 * Self.second))
            d.activity(at: 131 * Self.second, received: received + 4_000)
            #expect(d.check(now: 131 * Self.second) == .tooSlow(bytesPerSecond: 4_000 / 5))
        }
    }

    @Test func withoutAMinimumSpeedATrickleOnlyNeverStalls() {
        var d = Self.deadlines()
        d.headEnded(at: 120 * Self.second, final: true)
        for t in stride(from: 121, to: 200, by: 4) { d.activity(at: UInt64(t) * Self.second, received: Int64(t)) }
        #expect(d.check(now: 200 * Self.second) == .runningUntil(202 * Self.second))
    }

    /// A segmented attempt's connections share the minimum (each brings its part), and time the
    /// loop was held up by our own side (a write the disk kept waiting) is no origin's slowness.
    @Test func theMinimumIsSharedAndTimeHeldOnOurSideIsLeftOut() {
        var shared = AttemptDeadlines(connectTimeout: 10, headTimeout: 30, stallTimeout: 5, minSpeed: 1_000, startedAt: 0)
        shared.headEnded(at: 0, final: true)
        shared.activity(at: 5 * Self.second, received: 1_500, connections: 4)  // 300 B/s >= 250
        #expect(shared.check(now: 5 * Self.second) == .runningUntil(10 * Self.second))
        shared.activity(at: 10 * Self.second, received: 2_500, connections: 2)  // 200 B/s < 500
        #expect(shared.check(now: 10 * Self.second) == .tooSlow(bytesPerSecond: 200))

        var held = AttemptDeadlines(connectTimeout: 10, headTimeout: 30, stallTimeout: 5, minSpeed: 1_000, startedAt: 0)
        held.headEnded(at: 0, final: true)
        held.held(for: 4 * Self.second, until: 4 * Self.second)
        held.activity(at: 6 * Self.second, received: 1_500)  // 1 500 B in the 2 s not held: not yet a whole window
        #expect(held.check(now: 6 * Self.second) == .runningUntil(11 * Self.second))
        held.activity(at: 9 * Self.second, received: 5_000)  // 5 000 B in 5 s: 1 000 B/s
        #expect(held.check(now: 9 * Self.second) == .runningUntil(14 * Self.second))
    }

    /// A head that ended during a held-up turn starts its window where the turn ended, never
    /// after the time the loop reads next (before, the window could start in the future: the next
    /// judgement's subtraction overflowed).
    @Test func aWindowBegunDuringAHeldTurnStartsWhenTheTurnEnded() {
        var d = AttemptDeadlines(connectTimeout: 10, headTimeout: 30, stallTimeout: 5, minSpeed: 1_000, startedAt: 0)
        d.headEnded(at: 3 * Self.second, final: true)  // Inside a turn from 2 s to 4 s.
        d.held(for: 2 * Self.second, until: 4 * Self.second)
        guard case .receiving(_, let window) = d.phase else { Issue.record("not receiving"); return }
        #expect(window.start == 4 * Self.second)
        d.activity(at: 4 * Self.second, received: 10)
        #expect(d.check(now: 4 * Self.second) == .runningUntil(9 * Self.second))
        d.activity(at: 9 * Self.second, received: 5_010)
        #expect(d.check(now: 9 * Self.second) == .runningUntil(14 * Self.second))
    }
}
