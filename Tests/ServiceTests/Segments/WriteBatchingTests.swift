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
        var room: Int?
        let plan: Plan
        var testDescription: String { name }
    }

    static let batching = WriteBatching(capacity: 1000, maxHold: 0.2)

    static let cases: [Case] = [
        Case(name: "the first piece is gathered", held: 0, incoming: 100, heldFor: 0, plan: Plan(gather: 100, flush: false)),
        Case(name: "an old clock means nothing while nothing is held",
             held: 0, incoming: 100, heldFor: 99, plan: Plan(gather: 100, flush: false)),
        Case(name: "pieces gather while they fit", held: 500, incoming: 100, heldFor: 0.1, plan: Plan(gather: 100, flush: false)),
        Case(name: "a piece that fills the buffer exactly writes it",
             held: 900, incoming: 100, heldFor: 0.1, plan: Plan(gather: 100, flush: true)),
        Case(name: "a piece that does not fit fills the buffer, which is written; the rest comes next",
             held: 950, incoming: 100, heldFor: 0.1, plan: Plan(gather: 50, flush: true)),
        Case(name: "a held byte that waited maxHold is written with the new ones",
             held: 10, incoming: 10, heldFor: 0.2, plan: Plan(gather: 10, flush: true)),
        Case(name: "more than a buffer's worth: a buffer at a time",
             held: 0, incoming: 5000, heldFor: 0, plan: Plan(gather: 1000, flush: true)),
        Case(name: "a full buffer (never left so) is written first",
             held: 1000, incoming: 10, heldFor: 0, plan: Plan(gather: 0, flush: true)),
        Case(name: "a buffer with less room this time holds that much",
             held: 0, incoming: 5000, heldFor: 0, room: 700, plan: Plan(gather: 700, flush: true)),
        Case(name: "less room does not start the clock",
             held: 0, incoming: 100, heldFor: 99, room: 700, plan: Plan(gather: 100, flush: false)),
        Case(name: "a piece that fills the room writes it",
             held: 600, incoming: 150, heldFor: 0.1, room: 700, plan: Plan(gather: 100, flush: true)),
        Case(name: "room beyond the capacity is the capacity",
             held: 0, incoming: 5000, heldFor: 0, room: 9000, plan: Plan(gather: 1000, flush: true)),
        Case(name: "no room at all (never asked) still takes a byte at a time",
             held: 0, incoming: 10, heldFor: 0, room: 0, plan: Plan(gather: 1, flush: true)),
    ]

    @Test(arguments: cases)
    func plans(_ c: Case) {
        #expect(Self.batching.plan(held: c.held, incoming: c.incoming, heldFor: c.heldFor, room: c.room) == c.plan)
    }

    /// Pieces of 16 KiB, as libcurl hands them over, into buffers of 1 MiB: every write is a whole
    /// buffer, at a multiple of the buffer from the start, until the last one.
    @Test func libcurlPiecesBecomeWholeAlignedBuffers() {
        let batching = WriteBatching(capacity: 1 << 20, maxHold: 10)
        var held = 0
        var written = 0
        var writes: [(offset: Int, count: Int)] = []
        let total = 3 * (1 << 20) + 12_345
        var arrived = 0
        while arrived < total {
            var piece = min(16_000, total - arrived)  // Not a divisor of the buffer.
            arrived += piece
            while piece > 0 {
                let plan = batching.plan(held: held, incoming: piece, heldFor: 0)
                held += plan.gather
                piece -= plan.gather
                if plan.flush {
                    writes.append((written, held))
                    written += held
                    held = 0
                }
            }
        }
        writes.append((written, held))  // The end writes the rest.
        #expect(writes.count == 4)
        #expect(writes.dropLast().allSatisfy { $0.count == 1 << 20 && $0.offset % (1 << 20) == 0 })
        #expect(writes.last?.count == 12_345)
    }

    /// A `maxHold` of 0 writes every piece as it comes (no gathering).
    @Test func noHoldWritesEachPiece() {
        let unbatched = WriteBatching(capacity: 1000, maxHold: 0)
        #expect(unbatched.plan(held: 0, incoming: 10, heldFor: 0) == Plan(gather: 10, flush: true))
    }

    /// The bounds: a capacity of at least one byte, a hold of at least 0.
    @Test func boundsAreClamped() {
        let odd = WriteBatching(capacity: 0, maxHold: -1)
        #expect(odd.capacity == 1)
        #expect(odd.maxHold == 0)
    }
}
