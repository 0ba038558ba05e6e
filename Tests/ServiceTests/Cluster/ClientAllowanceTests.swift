import Testing
@testable import DownloadService

/// The in-memory fast path of `--max-downloads-per-client` in cluster mode: how many places one
/// reservation claims, and how long a spare one may be given.
@Suite struct ClientAllowanceTests {
    @Test(arguments: [
        (0, 1000, 32), (900, 1000, 25), (990, 1000, 2), (996, 1000, 1), (999, 1000, 1), (1000, 1000, 1),
        (0, 2, 1), (0, 8, 2), (0, 1, 1), (5, 20, 3),
    ])
    func blocks(held: Int, limit: Int, block: Int) {
        #expect(ClientAllowance.block(held: held, limit: limit) == block)
    }

    /// A block never takes more than the room left (`ClientTokenStore` caps it at `limit - held`).
    @Test func aBlockIsAtMostAQuarterOfTheRoomLeftWhenMoreThanOne() {
        for limit in 1...300 {
            for held in 0..<limit {
                let block = ClientAllowance.block(held: held, limit: limit)
                #expect(block == 1 || block * 4 <= limit - held)
            }
        }
    }

    @Test(arguments: [(100.0, 100.0, true), (100.0, 104.9, true), (100.0, 105.0, false), (100.0, 130.0, false)])
    func spares(claimedAt: Double, now: Double, usable: Bool) {
        #expect(ClientAllowance.usable(claimedAt: claimedAt, now: now, recent: 10) == usable)
    }
}
