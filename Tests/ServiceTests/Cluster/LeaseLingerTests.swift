import Testing
@testable import DownloaderEngine

/// How long a completed download stays held after its completion or its last join (pure).
@Suite struct LeaseLingerTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var until: Double?
        var now: Double
        var remaining: Double?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "never lingered: let go now", until: nil, now: 5, remaining: nil),
        Case(name: "lingering", until: 11, now: 10.25, remaining: 0.75),
        Case(name: "at its end: let go now", until: 11, now: 11, remaining: nil),
        Case(name: "past its end: let go now", until: 11, now: 30, remaining: nil),
    ]

    @Test(arguments: cases) func remaining(_ c: Case) {
        #expect(LeaseLinger(seconds: 1).remaining(until: c.until, now: c.now) == c.remaining)
    }

    @Test func onlyACompletedDownloadLingersAndFromNow() {
        let linger = LeaseLinger(seconds: 1.5)
        #expect(linger.until(completed: true, now: 10) == 11.5)
        #expect(linger.until(completed: false, now: 10) == nil)
        #expect(LeaseLinger(seconds: 0).remaining(until: LeaseLinger(seconds: 0).until(completed: true, now: 3), now: 3) == nil,
                "no linger: let go at once")
    }
}
