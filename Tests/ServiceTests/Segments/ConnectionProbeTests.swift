import Testing
@testable import DownloaderEngine

/// Whether more connections pay (`ConnectionProbe`): pure decisions from bytes and times.
@Suite struct ConnectionProbeTests {
    static let mb: Int64 = 1_000_000

    @Test func aloneForTheWindowAfterAWarmUpThenOneProbe() {
        var probe = ConnectionProbe(window: 0.25)
        #expect(probe.allowed(granted: 4) == 1)
        #expect(probe.observe(written: 0, at: 10) == .none)  // The first bytes start the warm-up…
        #expect(probe.phase == .warming(since: 10))
        #expect(probe.observe(written: 1 * Self.mb, at: 10.2) == .none)
        #expect(probe.observe(written: 2 * Self.mb, at: 10.25) == .none)  // …a window later, the measure.
        #expect(probe.phase == .alone(since: 10.25, written: 2 * Self.mb))
        #expect(probe.allowed(granted: 4) == 1)
        #expect(probe.observe(written: 12 * Self.mb, at: 10.45) == .none)
        #expect(probe.observe(written: 14 * Self.mb, at: 10.5) == .openProbe)  // 48 MB/s alone.
        #expect(probe.allowed(granted: 4) == 2)
        #expect(probe.measuring)
        // Until the probe's first bytes nothing is measured, however long that takes.
        #expect(probe.observe(written: 40 * Self.mb, at: 11) == .none)
        #expect(probe.allowed(granted: 1) == 1)
    }

    /// An origin capping each connection at 50 MB/s: two bring twice as much, so all open.
    @Test func theProbeDoublesTheRateSoEveryConnectionOpens() {
        var probe = Self.probing(rateAlone: 50)
        #expect(probe.observe(written: 100 * Self.mb + 15 * Self.mb, at: 20.15) == .none)
        #expect(probe.observe(written: 100 * Self.mb + 25 * Self.mb, at: 20.25) == .openAll)  // 100 MB/s
        #expect(probe.phase == .decided(split: true))
        #expect(probe.verdict == .init(split: true, alone: 50e6, probed: 100e6) && probe.decisions == 1)
        #expect(probe.allowed(granted: 4) == 4)
        #expect(!probe.measuring)
    }

    /// A connection slow in its first window (measured here on loopback: 475 MB/s, then ~800):
    /// its rate alone is taken after it, so a probe that brings nothing more is refused.
    @Test func theWarmUpIsNotTakenForTheRateAlone() {
        var probe = ConnectionProbe(window: 0.25)
        _ = probe.observe(written: 0, at: 10)
        #expect(probe.observe(written: 119 * Self.mb, at: 10.25) == .none)  // 475 MB/s: warming.
        #expect(probe.observe(written: 319 * Self.mb, at: 10.5) == .openProbe)  // 800 MB/s alone.
        probe.probeBegan(written: 320 * Self.mb, at: 10.5)
        #expect(probe.observe(written: 530 * Self.mb, at: 10.75) == .none)  // 840 MB/s with both.
        #expect(probe.phase == .decided(split: false))
    }

    /// An origin (or a CPU) that one connection already saturates: two bring no more, one stays.
    @Test(arguments: [50.0, 60.0, 62.4])
    func noGainKeepsOneConnection(_ both: Double) {
        var probe = Self.probing(rateAlone: 50)
        #expect(probe.observe(written: 100 * Self.mb + Int64(both * 0.25 * 1e6), at: 20.25) == .none)
        #expect(probe.phase == .decided(split: false))
        #expect(probe.allowed(granted: 4) == 1)
        #expect(probe.refusals == 1)
    }

    /// A "no" is measured again after four windows (1 s), then after twice as long each time.
    @Test func aNoIsTriedAgainLaterAndLessOften() {
        var probe = Self.probing(rateAlone: 50)
        #expect(probe.observe(written: 112_500_000, at: 20.25) == .none)  // 50 MB/s with both: no.
        #expect(probe.observe(written: 150 * Self.mb, at: 21.2) == .none)
        #expect(probe.phase == .decided(split: false))
        #expect(probe.observe(written: 160 * Self.mb, at: 21.25) == .none)  // 1 s later: alone again.
        #expect(probe.phase == .alone(since: 21.25, written: 160 * Self.mb))
        #expect(probe.allowed(granted: 4) == 1)
        #expect(probe.observe(written: 172_500_000, at: 21.5) == .openProbe)
        probe.probeBegan(written: 175 * Self.mb, at: 21.5)
        #expect(probe.observe(written: 187_500_000, at: 21.75) == .none)  // No again (50 MB/s).
        #expect(probe.refusals == 2 && probe.decisions == 2)
        #expect(probe.verdict?.split == false && probe.verdict.map { abs(($0.probed ?? 0) - 50e6) < 1 } == true)
        #expect(probe.observe(written: 200 * Self.mb, at: 23.5) == .none)
        #expect(probe.phase == .decided(split: false))  // Now after 2 s.
        #expect(probe.observe(written: 200 * Self.mb, at: 23.75) == .none)
        #expect(probe.phase == .alone(since: 23.75, written: 200 * Self.mb))
    }

    /// A "no" is not tried again when what is left takes less than four windows (1 s) at the rate
    /// one connection had alone (50 MB/s here: less than 50 MB); it is when more is left.
    @Test(arguments: [(Int64(49_999_999), false), (Int64(50_000_000), true), (Int64.max, true)])
    func aNoIsNotTriedAgainNearTheEnd(_ remaining: Int64, _ again: Bool) {
        var probe = Self.probing(rateAlone: 50)
        #expect(probe.observe(written: 112_500_000, at: 20.25) == .none)  // No.
        #expect(probe.observe(written: 160 * Self.mb, at: 21.25, remaining: remaining) == .none)
        #expect(probe.phase == (again ? .alone(since: 21.25, written: 160 * Self.mb) : .decided(split: false)))
        #expect(probe.allowed(granted: 4) == 1)
        guard !again else { return }
        // Never later either, once too little was left.
        #expect(probe.observe(written: 170 * Self.mb, at: 99, remaining: .max) == .none)
        #expect(probe.phase == .decided(split: false))
    }

    /// No probe at all when the rest takes less than four windows (1 s) at the rate alone: at
    /// 1 GB/s, 999 999 999 bytes left; one more byte left and the probe opens.
    @Test(arguments: [(Int64(999_999_999), false), (Int64(1_000_000_000), true)])
    func noProbeWhenTheRestIsTooShortForMoreConnectionsToPay(_ remaining: Int64, _ probes: Bool) {
        var probe = ConnectionProbe(window: 0.25)
        _ = probe.observe(written: 0, at: 10)
        _ = probe.observe(written: 0, at: 10.25)  // warmed up
        let step = probe.observe(written: 250 * Self.mb, at: 10.5, remaining: remaining)  // 1 GB/s alone
        #expect(step == (probes ? .openProbe : .none))
        #expect(probe.measuring == probes)
        guard !probes else { return }
        #expect(probe.phase == .decided(split: false))
        #expect(probe.verdict == .init(split: false, alone: 1e9, probed: nil) && probe.decisions == 1)
        #expect(probe.refusals == 0)
        #expect(probe.allowed(granted: 4) == 1)
        // Never later either: the rest only shrinks.
        #expect(probe.observe(written: 900 * Self.mb, at: 99, remaining: .max) == .none)
        #expect(probe.phase == .decided(split: false))
    }

    /// A "no" measured again finds too little left at the rate it measures then: decided without a
    /// second probe.
    @Test func aNoMeasuredAgainNearTheEndOpensNoProbe() {
        var probe = Self.probing(rateAlone: 50)
        #expect(probe.observe(written: 112_500_000, at: 20.25) == .none)  // No.
        #expect(probe.observe(written: 160 * Self.mb, at: 21.25) == .none)  // Alone again…
        // …at 100 MB/s now: 99 MB left take less than 1 s.
        #expect(probe.observe(written: 185 * Self.mb, at: 21.5, remaining: 99 * Self.mb) == .none)
        #expect(probe.phase == .decided(split: false))
        #expect(probe.verdict == .init(split: false, alone: 100e6, probed: nil) && probe.decisions == 2)
    }

    @Test func aQuarterMoreIsEnough() {
        var probe = Self.probing(rateAlone: 50)
        #expect(probe.observe(written: 100 * Self.mb + Int64(62.5 * 0.25 * 1e6), at: 20.25) == .openAll)
    }

    @Test func noWindowOpensEveryConnectionAtOnce() {
        var probe = ConnectionProbe(window: 0)
        #expect(probe.phase == .decided(split: true))
        #expect(probe.allowed(granted: 4) == 4)
        #expect(probe.observe(written: 0, at: 1) == .none)
        #expect(ConnectionProbe(window: -1).window == 0)
    }

    /// A probe measuring from `t = 20` with 100 MB written, after `rateAlone` MB/s alone.
    static func probing(rateAlone: Double) -> ConnectionProbe {
        var probe = ConnectionProbe(window: 0.25)
        _ = probe.observe(written: 0, at: 9.75)
        _ = probe.observe(written: 0, at: 10)  // warmed up
        #expect(probe.observe(written: Int64(rateAlone * 0.25 * 1e6), at: 10.25) == .openProbe)
        probe.probeBegan(written: 100 * mb, at: 20)
        return probe
    }
}
