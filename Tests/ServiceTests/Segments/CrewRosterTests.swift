import Testing
@testable import DownloaderEngine

/// Which pieces a segmented attempt's connections fetch, and when it stops (`CrewRoster`): pure
/// decisions, no transfer.
@Suite struct CrewRosterTests {
    /// Five pieces of 10 bytes, four connections, no probe (every connection at once).
    static func roster(connections: Int = 4, probe: Double = 0) -> CrewRoster {
        let segments = (0..<5).map { Segment(start: Int64($0) * 10, end: Int64($0 + 1) * 10) }
        return CrewRoster(pieces: PieceBook(segments: segments, total: 50), connections: connections,
                          probe: ConnectionProbe(window: probe))
    }

    static let ok: Result<TransferSummary, TransferFailure> = .success(TransferSummary(head: ResponseHead(status: 206, headers: [:], effectiveURL: "http://origin.test/f"), bodyBytes: 10))
    static let empty: Result<TransferSummary, TransferFailure> = .success(TransferSummary(head: ResponseHead(status: 206, headers: [:], effectiveURL: "http://origin.test/f"), bodyBytes: 0))

    @Test func opensOneFetchPerConnectionBesideThePrefix() {
        var roster = Self.roster()
        let result1 = roster.open()
        #expect(result1 == [1, 2, 3])
        #expect(roster.active == 4)
        let result2 = roster.open()
        #expect(result2 == [])
    }

    /// Kept pieces continued on one connection (`EngineCore.planSegments`): no probe opens a
    /// second; the prefix's connection takes the next piece once it ended, and so on.
    @Test func oneConnectionNeverProbesAndGoesPieceByPiece() {
        var roster = Self.roster(connections: 1, probe: 1)
        #expect(roster.open() == [])
        for now in stride(from: 0.0, through: 10, by: 0.5) {
            roster.pieces.advance(0, to: min(10, Int64(now) + 1))
            #expect(roster.probeStep(now) == [])
        }
        #expect(roster.active == 1)
        let (launches, stop) = roster.mainEnded(cut: nil)
        #expect(launches == [1] && stop == nil)
        roster.pieces.advance(1, to: 20)
        #expect(roster.fetchEnded(1, Self.ok).again == 2)
    }

    @Test func aConnectionThatFinishedItsPieceTakesTheNextOne() {
        var roster = Self.roster()
        _ = roster.open()
        roster.pieces.advance(1, to: 20)
        let (again, stop) = roster.fetchEnded(1, Self.ok)
        #expect(again == 4)
        #expect(stop == nil)
        roster.pieces.advance(2, to: 30)
        let result3 = roster.fetchEnded(2, Self.ok)
        #expect(result3.again == nil)  // Nothing left.
        #expect(roster.active == 3)
    }

    struct EndCase: CustomTestStringConvertible, Sendable {
        let name: String
        let written: Int64
        let result: Result<TransferSummary, TransferFailure>
        let retriesBefore: Int
        let again: Int?
        let stops: Bool
        var testDescription: String { name }
    }

    static let endCases: [EndCase] = [
        EndCase(name: "a complete piece: the next one", written: 20, result: ok, retriesBefore: 0, again: 4, stops: false),
        EndCase(name: "a success short of the end with bytes (a capped range) is no retry: asked again", written: 15, result: ok,
                retriesBefore: 3, again: 1, stops: false),
        EndCase(name: "a success without a byte is a cut: asked again", written: 10, result: empty, retriesBefore: 0,
                again: 1, stops: false),
        EndCase(name: "a success without a byte, no retries left: everything stops", written: 10, result: empty,
                retriesBefore: 3, again: nil, stops: true),
        EndCase(name: "a transient cut: asked again", written: 12,
                result: .failure(TransferFailure(.connection, "reset")), retriesBefore: 0, again: 1, stops: false),
        EndCase(name: "a transient cut without retries left: everything stops", written: 12,
                result: .failure(TransferFailure(.connection, "reset")), retriesBefore: 3, again: nil, stops: true),
        EndCase(name: "a final refusal: everything stops", written: 10,
                result: .failure(TransferFailure(.rejected, "changed")), retriesBefore: 0, again: nil, stops: true),
    ]

    @Test(arguments: endCases)
    func decidesAtAFetchsEnd(_ c: EndCase) {
        var roster = Self.roster()
        _ = roster.open()
        for _ in 0..<c.retriesBefore { _ = roster.pieces.retry(1, limit: CrewRoster.retriesPerSegment) }
        roster.pieces.advance(1, to: c.written)
        let (again, stop) = roster.fetchEnded(1, c.result)
        #expect(again == c.again)
        #expect((stop != nil) == c.stops)
        #expect(roster.running[1] != nil || c.again != 1)  // A piece asked again keeps its place.
    }

    @Test func nothingIsTakenOrAskedAgainOnceItStops() {
        var roster = Self.roster()
        _ = roster.open()
        roster.stop()
        let cut = roster.fetchEnded(1, .failure(TransferFailure(.connection, "reset")))
        #expect(cut.again == nil && cut.stop == nil)
        let done = roster.fetchEnded(2, Self.ok)
        #expect(done.again == nil && done.stop == nil)
        let result4 = roster.mainEnded(cut: nil)
        #expect(result4.launches == [])
        let result5 = roster.open()
        #expect(result5 == [])
    }

    @Test func aCutPrefixIsTakenOverByAFetchOrStops() {
        var roster = Self.roster(connections: 2)
        roster.pieces.advance(0, to: 4)
        let (launches, stop) = roster.mainEnded(cut: TransferFailure(.connection, "reset"))
        #expect(launches == [0])
        #expect(stop == nil)
        #expect(!roster.idle)
        var refused = Self.roster(connections: 2)
        let result6 = refused.mainEnded(cut: TransferFailure(.rejected, "gone"))
        #expect(result6.stop != nil)
        #expect(refused.idle)
    }

    @Test func theFreedPrefixConnectionTakesTheNextPiece() {
        var roster = Self.roster(connections: 2)
        let result7 = roster.open()
        #expect(result7 == [1])
        roster.pieces.advance(0, to: 10)
        let result8 = roster.mainEnded(cut: nil)
        #expect(result8.launches == [2])
    }

    /// The probe's decision is handed to the download's story once, with the rates it was made from.
    @Test func theProbesDecisionIsToldOnce() {
        var roster = Self.roster(probe: 0.25)
        #expect(roster.open() == [])
        roster.pieces.advance(0, to: 2)
        #expect(roster.probeStep(9.75) == [])  // The warm-up starts…
        #expect(roster.probeStep(10) == [])  // …and the measure after it.
        roster.pieces.advance(0, to: 7)
        #expect(roster.probeStep(10.25) == [4])  // 20 bytes/s alone; the probe takes the last piece.
        #expect(roster.takeVerdict() == nil)
        #expect(roster.fetchWrote(4, count: 1, next: 41, at: 10.25) == [])  // Its first bytes.
        roster.pieces.advance(0, to: 9)
        #expect(roster.fetchWrote(4, count: 9, next: 50, at: 10.5) == [1, 2])  // 48 bytes/s with both: all.
        let told = roster.takeVerdict()
        #expect(told?.verdict == .init(split: true, alone: 20, probed: 48) && told?.connections == 4)
        #expect(roster.takeVerdict() == nil)
    }

    @Test func withAProbeTheDownloadStartsAlone() {
        var roster = Self.roster(probe: 0.5)
        let result9 = roster.open()
        #expect(result9 == [])
        #expect(roster.active == 1)
    }
}
