import Testing
@testable import DownloaderEngine

/// A reservation under `--max-downloads-per-client` prunes dead rows only when the raw count (an
/// upper bound of the places held) reaches the limit, and refuses only after pruning.
@Suite struct ClientReservationTests {
    @Test(arguments: [
        (0, 1, false, ClientReservation.insert),
        (999, 1000, false, .insert),
        (1000, 1000, false, .prune),
        (1500, 1000, false, .prune),
        (999, 1000, true, .insert),
        (1000, 1000, true, .refuse),
        (0, 0, false, .prune),
        (0, 0, true, .refuse),
    ] as [(Int, Int, Bool, ClientReservation)])
    func steps(rows: Int, limit: Int, pruned: Bool, expected: ClientReservation) {
        #expect(ClientReservation.step(rows: rows, limit: limit, pruned: pruned) == expected)
    }
}
