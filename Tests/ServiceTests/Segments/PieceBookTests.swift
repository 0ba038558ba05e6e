import Testing
@testable import DownloaderEngine

/// How a segmented attempt's pieces are handed out and counted (`PieceBook`): pure bookkeeping.
@Suite struct PieceBookTests {
    /// 40 bytes in four pieces of 10; piece 2 already complete (resumed).
    static func book() -> PieceBook {
        PieceBook(segments: [Segment(start: 0, end: 10), Segment(start: 10, end: 20),
                             Segment(start: 20, end: 30, next: 30), Segment(start: 30, end: 40, next: 35)], total: 40)
    }

    @Test func countsWhatIsWrittenAsPiecesAdvance() {
        var book = Self.book()
        #expect(book.written == 15)
        book.advance(0, to: 4)
        book.advance(3, to: 38)
        #expect(book.written == 22)
        #expect(book.written == book.segments.writtenBytes)
    }

    @Test func handsOutPiecesInFileOrderOrFromTheEndEachOnce() {
        var first = Self.book()
        let result1 = first.claimFirst()
        #expect(result1 == 1)
        let result2 = first.claimFirst()
        #expect(result2 == 3)  // Piece 2 is complete: nobody fetches it.
        let result3 = first.claimFirst()
        #expect(result3 == nil)
        let result4 = first.claimLast()
        #expect(result4 == nil)
        var last = Self.book()
        let result5 = last.claimLast()
        #expect(result5 == 3)
        let result6 = last.claimFirst()
        #expect(result6 == 1)
        let result7 = last.claimLast()
        #expect(result7 == nil)
    }

    struct ContiguousCase: CustomTestStringConvertible, Sendable {
        let name: String
        let nexts: [Int64]
        let contiguous: Int64
        var testDescription: String { name }
    }

    static let contiguousCases: [ContiguousCase] = [
        ContiguousCase(name: "nothing written", nexts: [0, 10, 20, 30], contiguous: 0),
        ContiguousCase(name: "inside the prefix", nexts: [7, 15, 20, 30], contiguous: 7),
        ContiguousCase(name: "the prefix complete, the next piece partly", nexts: [10, 15, 30, 40], contiguous: 15),
        ContiguousCase(name: "a gap after complete pieces", nexts: [10, 20, 25, 40], contiguous: 25),
        ContiguousCase(name: "everything", nexts: [10, 20, 30, 40], contiguous: 40),
    ]

    @Test(arguments: contiguousCases)
    func contiguousEndsAtTheFirstIncompletePiece(_ c: ContiguousCase) {
        var book = PieceBook(segments: [Segment(start: 0, end: 10), Segment(start: 10, end: 20),
                                        Segment(start: 20, end: 30), Segment(start: 30, end: 40)], total: 40)
        for (index, next) in c.nexts.enumerated() { book.advance(index, to: next) }
        #expect(book.contiguous == c.contiguous)
        #expect(book.allComplete == (c.contiguous == 40))
    }

    @Test func thePrefixRunsOnIntoUntouchedPiecesNobodyHas() {
        var book = PieceBook(segments: [Segment(start: 0, end: 10), Segment(start: 10, end: 20),
                                        Segment(start: 20, end: 30), Segment(start: 30, end: 40)], total: 40)
        let result8 = book.extendPrefix()
        #expect(result8 == 20)
        #expect(book.segments[0] == Segment(start: 0, end: 20))
        #expect(book.segments[1] == Segment(start: 20, end: 20))  // Left empty, at the new end.
        let result9 = book.claimFirst()
        #expect(result9 == 2)  // Taken by a fetch: the prefix stops before it.
        let result10 = book.extendPrefix()
        #expect(result10 == nil)
        var written = PieceBook(segments: [Segment(start: 0, end: 10), Segment(start: 10, end: 20, next: 12)], total: 20)
        let result11 = written.extendPrefix()
        #expect(result11 == nil)  // Part of it is written already.
    }

    /// The prefix running on through several pieces leaves a table the journal still reads: a
    /// restart resumes every piece where it stood.
    @Test func aPrefixThatRanOnThroughSeveralPiecesIsStillJournaled() {
        var book = PieceBook(segments: [Segment(start: 0, end: 10), Segment(start: 10, end: 20),
                                        Segment(start: 20, end: 30), Segment(start: 30, end: 40)], total: 40)
        book.advance(0, to: 10)
        #expect(book.extendPrefix() == 20)
        book.advance(0, to: 20)
        #expect(book.extendPrefix() == 30)
        book.advance(0, to: 25)
        #expect(book.segments == [Segment(start: 0, end: 30, next: 25), Segment(start: 30, end: 30), Segment(start: 30, end: 30),
                                  Segment(start: 30, end: 40)])
        #expect(SegmentJournal.segments(SegmentJournal.text(book.segments)) == book.segments)
        #expect(book.written == 25 && book.contiguous == 25)
    }

    @Test func countsRetriesPerPieceUpToTheLimit() {
        var book = Self.book()
        let result12 = book.retry(1, limit: 2)
        #expect(result12)
        let result13 = book.retry(1, limit: 2)
        #expect(result13)
        let result14 = book.retry(1, limit: 2)
        #expect(!result14)
        let result15 = book.retry(3, limit: 2)
        #expect(result15)
    }
}

/// When a segmented attempt's in-place writes are checkpointed (`CheckpointPacing`).
@Suite struct CheckpointPacingTests {
    struct Step: Sendable {
        let count: Int64
        let at: Double
        var stopping = false
        var endsBefore = false
        let due: Bool
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let steps: [Step]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "due once the bytes are reached", steps: [
            Step(count: 3, at: 0.1, due: false), Step(count: 1, at: 0.2, due: true), Step(count: 3, at: 0.3, due: false)]),
        Case(name: "due once the time passed, however few the bytes", steps: [
            Step(count: 1, at: 0.5, due: false), Step(count: 1, at: 1.0, due: true)]),
        Case(name: "one at a time: what is due meanwhile waits for the next write after it ended", steps: [
            Step(count: 4, at: 0.1, due: true), Step(count: 4, at: 0.2, due: false), Step(count: 4, at: 0.3, due: false),
            Step(count: 1, at: 0.4, endsBefore: true, due: true)]),
        Case(name: "none once the attempt stops", steps: [
            Step(count: 10, at: 2, stopping: true, due: false)]),
    ]

    @Test func aCheckpointIsInFlightUntilItEnded() {
        var pacing = CheckpointPacing(bytes: 4, seconds: 1, now: 0)
        #expect(!pacing.inFlight)
        let result16 = pacing.wrote(4, at: 0.1, stopping: false)
        #expect(result16)
        #expect(pacing.inFlight)
        pacing.ended()
        #expect(!pacing.inFlight)
    }

    @Test(arguments: cases)
    func paces(_ c: Case) {
        var pacing = CheckpointPacing(bytes: 4, seconds: 1, now: 0)
        for (number, step) in c.steps.enumerated() {
            if step.endsBefore { pacing.ended() }
            let due = pacing.wrote(step.count, at: step.at, stopping: step.stopping)
            #expect(due == step.due, "step \(number)")
        }
    }
}
