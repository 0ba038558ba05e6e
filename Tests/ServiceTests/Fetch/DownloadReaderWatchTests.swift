import Dispatch
import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// `DownloadReader.watch` and `close` decide in one order (under the reader's lock): a watcher
/// asked for after the reader closed is never registered on the download's tail, so it is neither
/// kept (with what it captures) until the download goes away nor told of later changes.
@Suite struct DownloadReaderWatchTests {
    final class Captured: Sendable {}

    final class Counter: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// A reader on its own tail; `teller` is the queue the tail tells its watchers on.
    static func reader(teller: DispatchQueue, detached: Counter) -> (DownloadReader, DownloadTail) {
        let tail = DownloadTail(TailState(), teller: teller)
        let snapshot = DownloadSnapshot(id: "a", url: "http://o.test/f", state: .downloading, storage: .cache, callers: 1,
                                        createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0))
        let reader = DownloadReader(id: "a", snapshot: snapshot, coalesced: false, tail: tail) {
            detached.add()
        }
        return (reader, tail)
    }

    /// Waits (bounded) until what was queued on `teller` before has run.
    static func flush(_ teller: DispatchQueue) {
        let flushed = DispatchSemaphore(value: 0)
        teller.async { flushed.signal() }
        #expect(flushed.wait(timeout: .now() + 10) == .success)
    }

    @Test func aWatcherAskedForAfterCloseIsNeitherKeptNorTold() {
        let teller = DispatchQueue(label: "test-tail-teller")
        let detached = Counter()
        let (reader, tail) = Self.reader(teller: teller, detached: detached)
        let told = Counter()
        weak var released: Captured?
        do {
            let captured = Captured()
            released = captured
            reader.close()
            reader.watch { withExtendedLifetime(captured) { told.add() } }
        }
        #expect(released == nil, "the closed reader's watcher is still held by the tail")
        tail.update { $0.heads += 1 }
        Self.flush(teller)  // The tell that change queued (if any) has run.
        #expect(told.value == 0)
        #expect(detached.value == 1)
    }

    @Test func anOpenReadersWatcherIsToldUntilClose() {
        let teller = DispatchQueue(label: "test-tail-teller")
        let detached = Counter()
        let (reader, tail) = Self.reader(teller: teller, detached: detached)
        let told = Counter()
        weak var released: Captured?
        do {
            let captured = Captured()
            released = captured
            reader.watch { withExtendedLifetime(captured) { told.add() } }
        }
        #expect(released != nil)
        tail.update { $0.heads += 1 }
        Self.flush(teller)
        #expect(told.value == 1)
        reader.close()
        #expect(released == nil)
        tail.update { $0.heads += 1 }
        Self.flush(teller)
        #expect(told.value == 1)
        reader.close()
        #expect(detached.value == 1)
    }
}
