import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// Whom a download's tail tells of a change, and where (`TailChange`, `DownloadTail`): new bytes
/// only to readers that asked for them, anything else to all; on the teller's queue, once per burst.
@Suite struct DownloadTailTests {
    static func state(_ phase: TailState.Phase = .flowing, available: Int64 = 0, generation: UInt64 = 1, path: String = "/p") -> TailState {
        var state = FetchCursorTests.tail(phase, available: available, total: nil, generation: generation)
        state.path = path
        return state
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let before: TailState
        let after: TailState
        let change: TailChange
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "bytes landing while flowing", before: state(available: 10), after: state(available: 20), change: .moreBytes),
        Case(name: "bytes and a new version", before: state(available: 10), after: state(available: 20, generation: 2), change: .other),
        Case(name: "the version restarting from 0", before: state(available: 10), after: state(available: 0, generation: 2), change: .other),
        Case(name: "completed", before: state(available: 10), after: state(.completed, available: 10), change: .other),
        Case(name: "flowing again after waiting", before: state(.waiting, available: 10), after: state(available: 20), change: .other),
        Case(name: "the file moved", before: state(available: 10), after: state(available: 10, path: "/q"), change: .other),
        Case(name: "bytes and the file moved", before: state(available: 10), after: state(available: 20, path: "/q"), change: .other),
    ]

    @Test(arguments: cases)
    func kindOfChange(_ c: Case) {
        #expect(TailChange(from: c.before, to: c.after) == c.change)
    }

    @Test func changesToldTogetherAreMoreBytesOnlyIfEachIs() {
        #expect(TailChange.moreBytes.merged(with: .moreBytes) == .moreBytes)
        #expect(TailChange.moreBytes.merged(with: .other) == .other)
        #expect(TailChange.other.merged(with: .moreBytes) == .other)
    }

    /// A tail whose teller is held (suspended) until `flush`, and the names of the watchers told, in order.
    final class Harness: Sendable {
        let teller = DispatchQueue(label: "test.teller")
        let tail: DownloadTail
        let told = Mutex<[String]>([])
        let onTeller = Mutex<Bool>(true)
        static let key = DispatchSpecificKey<Bool>()

        init() {
            teller.setSpecific(key: Self.key, value: true)
            tail = DownloadTail(DownloadTailTests.state(available: 0), teller: teller)
            teller.suspend()
        }

        func watch(_ name: String) -> UInt64 {
            tail.watch { [self] in
                if DispatchQueue.getSpecific(key: Self.key) != true { onTeller.withLock { $0 = false } }
                told.withLock { $0.append(name) }
            }
        }

        func bytes(_ available: Int64) { tail.update { $0.available = available } }

        /// Lets the held tells run and waits for them; what they told since the last flush.
        func flush() -> [String] {
            teller.resume()
            teller.sync {}
            teller.suspend()
            return told.withLock { names in
                let sorted = names.sorted()
                names = []
                return sorted
            }
        }
    }

    @Test func newBytesAreToldOnlyToThoseWhoAskedOnceEach() {
        let h = Harness()
        let a = h.watch("a")
        _ = h.watch("b")
        h.bytes(10)
        #expect(h.flush() == [])  // nobody asked: nothing queued at all
        h.tail.awaitMoreBytes(a)
        h.bytes(20)
        h.bytes(30)
        h.bytes(40)
        #expect(h.flush() == ["a"])  // three batches, one tell
        h.bytes(50)
        #expect(h.flush() == [])  // told once per ask
        #expect(h.tail.current.available == 50)
        #expect(h.onTeller.withLock { $0 })
        h.teller.resume()
    }

    @Test func anyOtherChangeIsToldToEveryoneAndAnswersTheAsk() {
        let h = Harness()
        let a = h.watch("a")
        _ = h.watch("b")
        h.tail.awaitMoreBytes(a)
        h.bytes(10)
        h.tail.update { $0.phase = .completed }
        #expect(h.flush() == ["a", "b"])  // bytes then completion: one tell, to all
        h.tail.update { $0.phase = .completed }  // no change: no tell
        #expect(h.flush() == [])
        h.teller.resume()
    }

    @Test func anUnwatchedReaderIsToldNothingItAskedFor() {
        let h = Harness()
        let a = h.watch("a")
        h.tail.awaitMoreBytes(a)
        h.tail.unwatch(a)
        h.tail.awaitMoreBytes(a)  // too late: no such watcher
        h.bytes(10)
        h.tail.update { $0.phase = .removed }
        #expect(h.flush() == [])
        h.teller.resume()
    }

    @Test func anAskAfterTheTellWasQueuedIsAnsweredByIt() {
        let h = Harness()
        let a = h.watch("a")
        let b = h.watch("b")
        h.tail.awaitMoreBytes(a)
        h.bytes(10)  // queued for a
        h.tail.awaitMoreBytes(b)
        h.bytes(20)  // joins the queued tell, which takes whoever asked by the time it runs
        #expect(h.flush() == ["a", "b"])
        h.teller.resume()
    }
}
