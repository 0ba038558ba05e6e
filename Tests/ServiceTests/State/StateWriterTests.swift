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

    @Test func whatWaitsForDurabilityRunsOnlyAfterTheCommitThatSucceeds() async throws {
        // Three failures: the commit `whenDurable` asks for (on the writer thread, before the first
        // flush's), then both flushes'.
        let store = FlakyStore(failures: 3)
        let scheduler = ManualScheduler()
        let writer = StateWriter(store: store, minInterval: 0.2, scheduler: scheduler)
        let pending = Mutex<Set<String>>(["a"])
        writer.source = { retry in
            let ids = pending.withLock { ids in defer { ids = [] }; return ids.union(retry) }
            return StateBatch(upserts: ids.sorted().map { StateFixture.download($0, .paused) })
        }
        let ran = Mutex<[String]>([])
        writer.whenDurable { ran.withLock { $0.append("first") } }
        #expect(!writer.flush() && ran.withLock { $0.isEmpty })
        #expect(!writer.flush() && ran.withLock { $0.isEmpty })
        #expect(writer.flush() && ran.withLock { $0 } == ["first"])
        #expect(store.attempts.withLock { $0 } == 4)
        #expect(store.commits.withLock { $0.map { $0.upserts.map(\.id) } } == [["a"]])
        // Nothing left to commit: due at the next drain.
        writer.whenDurable { ran.withLock { $0.append("second") } }
        #expect(writer.flush() && ran.withLock { $0 } == ["first", "second"])
    }

    /// A store whose commits wait for `gate` (one signal each) and record their batches.
    final class GatedStore: StateStore, @unchecked Sendable {
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let commits = Mutex<[[String]]>([])
        func load() -> [StoredDownload] { [] }
        func checkpoint() {}
        func commit(_ batch: StateBatch) throws(StateStoreError) {
            entered.signal()
            gate.wait()
            commits.withLock { $0.append(batch.upserts.map(\.id)) }
        }
    }

    @Test func publishersThatComeDuringACommitShareTheNextOneAndFindTheirChangesCommitted() async throws {
        let store = GatedStore()
        let writer = StateWriter(store: store, minInterval: 0.2, scheduler: ManualScheduler())
        let pending = Mutex<Set<String>>(["a"])
        writer.source = { retry in
            let ids = pending.withLock { ids in defer { ids = [] }; return ids.union(retry) }
            return StateBatch(upserts: ids.sorted().map { StateFixture.download($0, .paused) })
        }
        let returned = Mutex(0)
        // A generous timeout: in a loaded parallel run this test's own steps can stall for seconds
        // (10 s once made all five time out before the test let the first commit end).
        let publish: @Sendable () -> Bool = {
            defer { returned.withLock { $0 += 1 } }
            return writer.publish(timeout: 40)
        }
        let first = Task { try await onThread(publish) }  // Threads: publish blocks.
        #expect(try await onThread { store.entered.wait(timeout: .now() + 20) } == .success, "the first commit began")
        pending.withLock { $0 = ["b", "c"] }
        let later = (0..<5).map { _ in Task { try await onThread(publish) } }
        try await Task.sleep(for: .milliseconds(50))
        #expect(returned.withLock { $0 } == 0, "nobody returns before its commit ended")
        store.gate.signal()  // The first commit ends; the next takes b and c for all five.
        #expect(try await first.value)
        #expect(try await onThread { store.entered.wait(timeout: .now() + 20) } == .success, "the shared commit began")
        try await Task.sleep(for: .milliseconds(50))
        #expect(returned.withLock { $0 } == 1, "the five wait for the commit that holds b and c")
        store.gate.signal()
        for task in later { #expect(try await task.value) }
        #expect(store.commits.withLock { $0 } == [["a"], ["b", "c"]])
    }

    @Test func aPublisherWaitsNoLongerThanItsTimeout() async throws {
        let store = GatedStore()
        let writer = StateWriter(store: store, minInterval: 0, scheduler: ManualScheduler())
        writer.source = { _ in StateBatch(upserts: [StateFixture.download("a", .paused)]) }
        #expect(!writer.publish(timeout: 0.2), "the store never answered")
        store.gate.signal()  // The hung commit ends, and the flush's own.
        store.gate.signal()
        writer.flush()
        #expect(store.commits.withLock { $0.count } == 2)
    }
}
