import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// The writer commits what the engine marked, batched; a failed commit's downloads go again.
@Suite struct StateWriterTests {
    /// A store that fails its first `failures` commits and records the others.
    final class FlakyStore: StateStore, @unchecked Sendable {
        let failures: Int
        let commits = Mutex<[StateBatch]>([])
        let attempts = Mutex(0)
        init(failures: Int) { self.failures = failures }
        func load() -> [StoredDownload] { [] }
        func checkpoint() {}
        func commit(_ batch: StateBatch) throws(StateStoreError) {
            let n = attempts.withLock { $0 += 1; return $0 }
            if n <= failures { throw StateStoreError(kind: .full, message: "disk full") }
            commits.withLock { $0.append(batch) }
        }
    }

    @Test func aFailedBatchIsRetriedWithTheNextChanges() async throws {
        let store = FlakyStore(failures: 1)
        let scheduler = ManualScheduler()
        let writer = StateWriter(store: store, minInterval: 0.2, scheduler: scheduler)
        let pending = Mutex<Set<String>>(["a", "b"])
        writer.source = { retry in
            let ids = pending.withLock { ids in defer { ids = [] }; return ids.union(retry) }
            return StateBatch(upserts: ids.sorted().map { StateFixture.download($0, .paused) })
        }
        writer.flush()
        #expect(writer.lastError?.kind == .full && store.commits.withLock { $0.isEmpty })
        pending.withLock { $0 = ["c"] }
        writer.flush()
        #expect(writer.lastError == nil)
        #expect(store.commits.withLock { $0.map { $0.upserts.map(\.id) } } == [["a", "b", "c"]])
        // Nothing marked, nothing failed: a flush commits nothing.
        writer.flush()
        #expect(store.commits.withLock { $0.count } == 1)
    }

    @Test func aFailedBatchIsRetriedByItselfAfterAWhile() async throws {
        let store = FlakyStore(failures: 1)
        let scheduler = ManualScheduler()
        let writer = StateWriter(store: store, minInterval: 0.2, scheduler: scheduler)
        writer.source = { retry in StateBatch(upserts: (retry.isEmpty ? ["a"] : retry).map { StateFixture.download($0, .paused) }) }
        writer.markDirty()
        try await withTimeout(5) { await scheduler.waitForTimer(dueIn: StateWriter.retryInterval) }
        #expect(store.attempts.withLock { $0 } == 1)
        scheduler.advance(StateWriter.retryInterval)
        writer.flush()
        #expect(store.commits.withLock { $0.first?.upserts.map(\.id) } == ["a"])
    }
}
