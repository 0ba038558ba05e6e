import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct RateEstimatorTests {
    @Test func firstSampleSetsRateThenAlphaFormula() {
        var r = RateEstimator(tau: 3, minSampleInterval: 0.05)
        r.reset(at: 0)
        r.add(1000, at: 1)
        #expect(r.rate == 1000)
        r.add(4000, at: 2)  // sample 4000 B/s over dt = 1
        let a = 1 - exp(-1.0 / 3)
        #expect(abs(r.rate - (a * 4000 + (1 - a) * 1000)) < 1e-9)
        r.add(0, at: 4)  // two quiet seconds
        let a2 = 1 - exp(-2.0 / 3)
        let expected = (1 - a2) * (a * 4000 + (1 - a) * 1000)
        #expect(abs(r.rate - expected) < 1e-9)
    }

    @Test func samplesShorterThanMinimumAccumulate() {
        var r = RateEstimator(tau: 3, minSampleInterval: 1)
        r.reset(at: 0)
        r.add(100, at: 0.25)
        r.add(100, at: 0.5)
        #expect(!r.hasRate)
        r.add(100, at: 1)
        #expect(r.rate == 300)
    }

    @Test func resetForgetsRate() {
        var r = RateEstimator(tau: 3)
        r.reset(at: 0)
        r.add(10_000_000, at: 1)
        r.reset(at: 1)
        #expect(r.rate == 0)
        #expect(r.eta(remaining: 100) == nil)
        r.add(500, at: 2)
        #expect(r.rate == 500)  // resumed bytes never inflate the fresh rate
    }

    @Test func etaIsStableUnderJitter() {
        var r = RateEstimator(tau: 3, minSampleInterval: 0.05)
        r.reset(at: 0)
        var t = 0.0
        var etas: [Double] = []
        var remaining: Int64 = 10_000_000
        for i in 0..<60 {
            t += 0.1
            let bytes: Int64 = i % 2 == 0 ? 150_000 : 50_000  // 1.5 MB/s and 0.5 MB/s alternating
            remaining -= bytes
            r.add(bytes, at: t)
            if i > 30, let eta = r.eta(remaining: remaining) { etas.append(eta) }
        }
        // Raw per-sample ETAs would jump by a factor of 3; the smoothed ETA just counts down by
        // about the elapsed 0.1 s, give or take 5 %.
        #expect(etas.count > 20)
        for (a, b) in zip(etas, etas.dropFirst()) { #expect(abs(b - (a - 0.1)) / a < 0.05) }
        #expect(abs(r.rate - 1_000_000) < 150_000)
    }

    @Test func etaUnknownWithoutTotalOrRate() {
        var r = RateEstimator(tau: 3)
        #expect(r.eta(remaining: 10) == nil)
        r.reset(at: 0)
        r.add(100, at: 1)
        #expect(r.eta(remaining: nil) == nil)
        #expect(r.eta(remaining: 200) == 2)
    }
}
