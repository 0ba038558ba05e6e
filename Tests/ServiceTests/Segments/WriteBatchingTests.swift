import Testing
@testable import DownloaderEngine

/// When a ranged fetch's gathered bytes go to the file (`WriteBatching`): pure decisions.
@Suite struct WriteBatchingTests {
    typealias Plan = WriteBatching.Plan

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let held: Int
        let incoming: Int
        let heldFor: Double
        let plan: Plan
        var testDescription: String { name }
    }

    static let batching = WriteBatching(capacity: 1000, maxHold: 0.2)

    static let cases: [Case] = [
        Case(name: "the first piece is gathered", held: 0, incoming: 100, heldFor: 0, plan: Plan()),
        Case(name: "an old clock means nothing while nothing is held", held: 0, incoming: 100, heldFor: 99, plan: Plan()),
        Case(name: "pieces gather while they fit", held: 500, incoming: 100, heldFor: 0.1, plan: Plan()),
        Case(name: "a piece that fills the buffer exactly writes it",
             held: 900, incoming: 100, heldFor: 0.1, plan: Plan(flushAfter: true)),
        Case(name: "a piece that does not fit writes the held ones first, then is gathered",
             held: 950, incoming: 100, heldFor: 0.1, plan: Plan(flushFirst: true)),
        Case(name: "a held byte that waited maxHold is written with the new ones",
             held: 10, incoming: 10, heldFor: 0.2, plan: Plan(flushAfter: true)),
        Case(name: "after writing what did not fit the clock starts again",
             held: 950, incoming: 100, heldFor: 5, plan: Plan(flushFirst: true)),
        Case(name: "a buffer's worth goes straight to the file",
             held: 0, incoming: 1000, heldFor: 0, plan: Plan(direct: true)),
        Case(name: "more than a buffer's worth: held ones first, then straight",
             held: 10, incoming: 5000, heldFor: 0, plan: Plan(flushFirst: true, direct: true)),
    ]

    @Test(arguments: cases)
    func plans(_ c: Case) {
        #expect(Self.batching.plan(held: c.held, incoming: c.incoming, heldFor: c.heldFor) == c.plan)
    }

    /// A `maxHold` of 0 writes every piece as it comes (no gathering).
    @Test func noHoldWritesEachPiece() {
        let unbatched = WriteBatching(capacity: 1000, maxHold: 0)
        #expect(unbatched.plan(held: 0, incoming: 10, heldFor: 0) == Plan(flushAfter: true))
        #expect(unbatched.plan(held: 0, incoming: 1000, heldFor: 0) == Plan(direct: true))
    }

    /// The bounds: a capacity of at least one byte, a hold of at least 0.
    @Test func boundsAreClamped() {
        let odd = WriteBatching(capacity: 0, maxHold: -1)
        #expect(odd.capacity == 1)
        #expect(odd.maxHold == 0)
    }
}
