import Foundation
import Synchronization
import Testing
@testable import DownloaderEngine

/// One lock per key: the same key excludes, different keys do not wait for each other, and the
/// table empties once nobody holds or waits (it never grows with the keys ever seen).
@Suite(.timeLimit(.minutes(1))) struct KeyedLocksTests {
    enum Step: Sendable { case lock(String), unlock(String) }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var steps: [Step]
        /// Entries after each step.
        var entries: [Int]
        var testDescription: String { name }
    }

    /// Sequences on one thread (different keys only: the same key twice would wait for itself).
    static let cases: [Case] = [
        Case(name: "one key: an entry while held, none after", steps: [.lock("a"), .unlock("a")], entries: [1, 0]),
        Case(name: "two keys held at once", steps: [.lock("a"), .lock("b"), .unlock("a"), .unlock("b")], entries: [1, 2, 1, 0]),
        Case(name: "let go in the order taken or the reverse", steps: [.lock("a"), .lock("b"), .unlock("b"), .unlock("a")],
             entries: [1, 2, 1, 0]),
        Case(name: "a key taken again after it was let go", steps: [.lock("a"), .unlock("a"), .lock("a"), .unlock("a")],
             entries: [1, 0, 1, 0]),
    ]

    @Test(arguments: cases) func entries(_ c: Case) {
        let locks = KeyedLocks<String>()
        var seen: [Int] = []
        for step in c.steps {
            switch step {
            case .lock(let key): locks.lock(key)
            case .unlock(let key): locks.unlock(key)
            }
            seen.append(locks.entries)
        }
        #expect(seen == c.entries)
    }

    /// A thread holding "a" for as long as the test says: "b" is taken meanwhile, "a" only after.
    @Test func aHeldKeyHoldsUpOnlyItself() {
        let locks = KeyedLocks<String>()
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread {
            locks.lock("a")
            holding.signal()
            _ = release.wait(timeout: .now() + 20)
            locks.unlock("a")
            done.signal()
        }.start()
        #expect(holding.wait(timeout: .now() + 10) == .success)

        let other = DispatchSemaphore(value: 0)
        Thread { locks.lock("b"); locks.unlock("b"); other.signal() }.start()
        #expect(other.wait(timeout: .now() + 10) == .success, "another key waited for a held one")

        let same = DispatchSemaphore(value: 0), left = DispatchSemaphore(value: 0)
        Thread { locks.lock("a"); same.signal(); locks.unlock("a"); left.signal() }.start()
        #expect(same.wait(timeout: .now() + 0.3) == .timedOut, "the same key did not wait")
        #expect(locks.entries == 1, "one entry: the holder and its waiter")
        release.signal()
        #expect(same.wait(timeout: .now() + 10) == .success, "the waiter gets the key once it is let go")
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(left.wait(timeout: .now() + 10) == .success)
        #expect(locks.entries == 0, "the table empties")
    }

    /// Many threads on a few keys: never two inside the same key at once, and the table ends empty.
    @Test func manyThreadsOnFewKeysExcludeEachOtherPerKey() {
        let locks = KeyedLocks<Int>()
        let inside = Mutex<[Int: Int]>([:]), overlaps = Mutex(0)
        let threads = 8, rounds = 2_000, keys = 3
        let finished = DispatchSemaphore(value: 0)
        for t in 0..<threads {
            Thread {
                for r in 0..<rounds {
                    let key = (t + r) % keys
                    locks.lock(key)
                    if inside.withLock({ $0[key, default: 0] += 1; return $0[key]! }) > 1 { overlaps.withLock { $0 += 1 } }
                    inside.withLock { $0[key]! -= 1 }
                    locks.unlock(key)
                }
                finished.signal()
            }.start()
        }
        for _ in 0..<threads { #expect(finished.wait(timeout: .now() + 30) == .success) }
        #expect(overlaps.withLock { $0 } == 0)
        #expect(locks.entries == 0)
    }
}
