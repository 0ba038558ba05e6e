import Foundation
import Testing
@testable import DownloaderEngine

/// The `StateStore` contract for what the operator leaves, against both engines (as
/// `StateStoreContractTests`): a tombstone is written with its row's deletion and loads back whole,
/// oldest first, the newest `Tombstone.limit` kept; the operator's hold is a download's own (kept
/// with its row, gone with it).
@Suite(.timeLimit(.minutes(2))) struct TombstoneContractTests {
    typealias Engine = StateStoreContractTests.Engine

    static func tombstone(_ id: String, at seconds: Double, by: RemovalCause = .operator) -> Tombstone {
        Tombstone(id: id, url: "https://o.test/\(id)?q=\"x\"", removedAt: Date(timeIntervalSince1970: 1_800_000_000 + seconds), by: by,
                  paths: ["/shared/partial/\(id).3.part", "/shared/cache/\(id).3-a b.bin"])
    }

    @Test(arguments: Engine.available) func aTombstoneIsWrittenWithItsRowsDeletionAndLoadsBackOldestFirst(engine: Engine) async throws {
        try await blocking { check in
            let open = try engine.place()
            let store = try open()
            try check.expect(store.loadTombstones().isEmpty)
            let (a, b, c) = (StateFixture.download("a", .completed), StateFixture.download("b", .paused), StateFixture.download("c", .failed))
            try store.commit(StateBatch(upserts: [a, b, c]))
            let first = Self.tombstone("a", at: 0.25)
            try store.commit(StateBatch(deletions: ["a"], tombstones: [first]))
            let second = Self.tombstone("c", at: 9, by: .retention)
            try store.commit(StateBatch(deletions: ["c"], tombstones: [second]))
            try check.expect(open().load() == [b])
            try check.expect(open().loadTombstones() == [first, second])
            // A tombstone alone (its row was never stored) is kept too.
            let lone = Self.tombstone("z", at: 10)
            try store.commit(StateBatch(tombstones: [lone]))
            try check.expect(open().loadTombstones() == [first, second, lone])
        }
    }

    @Test(arguments: Engine.available) func theNewestTombstonesAreKeptUpToTheLimit(engine: Engine) async throws {
        try await blocking { check in
            let open = try engine.place()
            let store = try open()
            let all = (0..<(Tombstone.limit + 3)).map { Self.tombstone(String(format: "%08x", $0), at: Double($0)) }
            try store.commit(StateBatch(tombstones: Array(all.prefix(Tombstone.limit))))
            try store.commit(StateBatch(tombstones: Array(all.suffix(3))))
            let kept = try open().loadTombstones()
            check.expect(kept.count == Tombstone.limit)
            check.expect(kept.first == all[3] && kept.last == all.last, "the three oldest went")
        }
    }

    @Test(arguments: Engine.available) func aHoldStaysWithItsRowAndGoesWithIt(engine: Engine) async throws {
        try await blocking { check in
            let open = try engine.place()
            var held = StateFixture.download("h", .paused)
            held.held = true
            try open().commit(StateBatch(upserts: [held, StateFixture.download("f", .paused)]))
            try check.expect(open().load().map(\.held) == [true, false])
            held.held = false
            try open().commit(StateBatch(upserts: [held]))
            try check.expect(open().load().map(\.held) == [false, false], "lifted")
            held.held = true
            try open().commit(StateBatch(upserts: [held]))
            try open().commit(StateBatch(deletions: ["h"], tombstones: [Self.tombstone("h", at: 1)]))
            held.held = false
            held.id = "h2"
            try open().commit(StateBatch(upserts: [held]))
            try check.expect(open().load().map(\.id) == ["f", "h2"] && open().load().allSatisfy { !$0.held }, "the hold went with its row")
        }
    }
}
