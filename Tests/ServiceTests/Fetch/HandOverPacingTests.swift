import Testing
@testable import DownloaderEngine

/// When a followed download's bytes go to its readers (`HandOverPacing`): pure decisions.
@Suite struct HandOverPacingTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let pending: Int
        let waited: Double
        let first: Bool
        let now: Bool
        let dueIn: Double?
        var testDescription: String { name }
    }

    static let pacing = HandOverPacing(minBytes: 1000, maxDelay: 0.005)

    static let cases: [Case] = [
        Case(name: "nothing held: nothing to do", pending: 0, waited: 9, first: true, now: false, dueIn: nil),
        Case(name: "an attempt's first bytes go at once (a reader's first byte never waits)",
             pending: 10, waited: 0, first: true, now: true, dueIn: 0.005),
        Case(name: "a few fresh bytes wait for more", pending: 10, waited: 0.001, first: false, now: false, dueIn: 0.004),
        Case(name: "a batch's worth goes at once", pending: 1000, waited: 0, first: false, now: true, dueIn: 0.005),
        Case(name: "held bytes that waited the delay go", pending: 10, waited: 0.005, first: false, now: true, dueIn: 0),
        Case(name: "held long ago: due at once, never negative", pending: 10, waited: 3, first: false, now: true, dueIn: 0),
    ]

    @Test(arguments: cases)
    func decides(_ c: Case) {
        #expect(Self.pacing.handOverNow(pending: c.pending, waited: c.waited, first: c.first) == c.now)
        let due = Self.pacing.dueIn(pending: c.pending, waited: c.waited)
        if let expected = c.dueIn {
            #expect(due != nil && abs(due! - expected) < 1e-9)
        } else {
            #expect(due == nil)
        }
    }

    @Test func boundsAreSane() {
        let odd = HandOverPacing(minBytes: 0, maxDelay: -1)
        #expect(odd.minBytes == 1 && odd.maxDelay == 0)
        #expect(odd.handOverNow(pending: 1, waited: 0, first: false))
    }
}
