import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// Start-up reads the state in batches while it restores (`StateStore.load(batchSize:_:)`,
/// `BatchHandOff`, `StartupLoad`): the same downloads in the same order as one `load`, tokens and
/// holds with the right rows, tombstoned rows handed over as ids, and a failed read reported after
/// the batches before it.
@Suite(.timeLimit(.minutes(1))) struct StartupLoadTests {
    /// Downloads 0..<count, every third with tokens (none, one or two), every fifth held.
    static func downloads(_ count: Int) -> [StoredDownload] {
        (0..<count).map { n in
            var d = StateFixture.download(String(format: "%016x", n), n % 2 == 0 ? .paused : .completed)
            if n % 3 == 0 { d.tokens = Set((0..<(n % 2 + 1)).map { TokenHash(token: "t\(n)-\($0)") }) }
            if n % 5 == 0 && d.state == .paused { d.held = true }
            return d
        }
    }

    @Test(arguments: [1, 7, 100, 4096]) func batchesHoldWhatOneLoadHolds(batchSize: Int) throws {
        let directory = EngineFixture.root().path
        let all = Self.downloads(250)
        try StateFixture.write(all, to: directory)
        let store = try SQLiteStateStore.open(directory: directory).store
        var batches: [[StoredDownload]] = []
        var totals: Set<Int> = []
        try store.load(batchSize: batchSize) { batch, total in
            batches.append(batch)
            totals.insert(total)
        }
        #expect(batches.flatMap { $0 } == all)
        #expect(batches.dropLast().allSatisfy { $0.count == batchSize } && (batches.last?.count ?? 0) <= batchSize)
        #expect(totals == [250])
        #expect(try store.load() == all)
        // The commits after a batched load know every row (no duplicate row, no lost token).
        var changed = all[3]
        changed.tokens = [TokenHash(token: "new")]
        try store.commit(StateBatch(upserts: [changed], deletions: [all[4].id]))
        var expected = all
        expected[3] = changed
        expected.remove(at: 4)
        #expect(try StateFixture.read(directory) == expected)
    }

    @Test func anEmptyStoreHandsOutNoBatch() throws {
        let store = try SQLiteStateStore.open(directory: EngineFixture.root().path).store
        var calls = 0
        try store.load(batchSize: 10) { _, _ in calls += 1 }
        #expect(calls == 0)
    }

    @Test func theHandOffKeepsOrderAndHoldsAtMostItsCapacity() async throws {
        let handOff = BatchHandOff<Int>(capacity: 2)
        let produced = Atomic<Int>(0)
        let producer = Thread {
            for n in 0..<50 {
                handOff.put(n)
                produced.add(1, ordering: .relaxed)
            }
            handOff.finish()
        }
        producer.start()
        // Nobody takes: the producer stops after `capacity` batches.
        let deadline = Date().addingTimeInterval(2)
        while produced.load(ordering: .relaxed) < 2 && Date() < deadline { usleep(1000) }
        usleep(50_000)
        #expect(produced.load(ordering: .relaxed) == 2)
        var taken: [Int] = []
        while let n = try handOff.next() { taken.append(n) }
        #expect(taken == Array(0..<50))
        #expect(try handOff.next() == nil)
    }

    @Test func aFailedReadIsThrownAfterTheBatchesBeforeIt() throws {
        let handOff = BatchHandOff<Int>(capacity: 4)
        handOff.put(1)
        handOff.put(2)
        handOff.finish(StateStoreError(kind: .damaged, message: "row 3"))
        #expect(try handOff.next() == 1)
        #expect(try handOff.next() == 2)
        #expect(throws: StateStoreError(kind: .damaged, message: "row 3")) { try handOff.next() }
    }

    @Test func tombstonedRowsComeAsIdsAndTheRestAsRecordsInOrder() throws {
        let directory = EngineFixture.root().path
        let all = Self.downloads(5000)
        try StateFixture.write(all, to: directory)
        let store = try SQLiteStateStore.open(directory: directory).store
        let buried = [all[10].id, all[2500].id, all[4999].id]
        try store.commit(StateBatch(tombstones: buried.map { Tombstone(id: $0, url: "u", removedAt: Date(), by: .operator, paths: []) }))
        let writer = StateWriter(store: store, scheduler: ManualScheduler())
        let load = StartupLoad(writer: writer, directory: directory, credential: { _ in [] }) { entry in
            DownloadRecord(stored: entry, tau: 1, progressInterval: 1)
        }
        let prologue = try load.waitForPrologue()
        #expect(prologue.journal == .none && Set(prologue.tombstones.map(\.id)) == Set(buried))
        var ids: [String] = []
        var gone: [String] = []
        var batches = 0
        while let batch = try load.next() {
            #expect(batch.total == 5000 && batch.records.count + batch.buried.count <= StartupLoad.batchSize)
            ids += batch.records.map(\.id)
            gone += batch.buried
            batches += 1
        }
        #expect(batches == (5000 + StartupLoad.batchSize - 1) / StartupLoad.batchSize)
        #expect(gone == buried)
        #expect(ids == all.map(\.id).filter { !buried.contains($0) })
    }
}
