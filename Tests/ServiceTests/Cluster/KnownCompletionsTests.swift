import Testing
@testable import DownloaderEngine

/// The bounded memory of completed downloads a replica serves while the database is unreachable:
/// found by id and by lease key, the oldest remembered goes first, a forgotten one is gone.
@Suite struct KnownCompletionsTests {
    static func entry(_ id: String, key: String? = nil, size: Int64 = 5) -> KnownCompletion {
        var tail = TailState()
        tail.phase = .completed
        tail.path = "/shared/cache/\(id).bin"
        return KnownCompletion(id: id, leaseKey: key ?? "http://o.test/\(id)",
                               file: CompletedFile(path: tail.path, fileName: "\(id).bin", size: size, sha256: "ab"), tail: tail)
    }

    @Test func keepsTheNewestWithinItsCapacityFoundByIdAndByKey() {
        var known = KnownCompletions(capacity: 3)
        for id in ["a", "b", "c", "d"] { known.remember(Self.entry(id)) }
        #expect(known.count == 3)
        #expect(known.entry(id: "a") == nil && known.entry(leaseKey: "http://o.test/a") == nil, "the oldest went first")
        #expect(known.entry(id: "d") == Self.entry("d") && known.entry(leaseKey: "http://o.test/c") == Self.entry("c"))

        known.remember(Self.entry("b", size: 9))  // Seen again: replaced, keeps its place.
        #expect(known.entry(id: "b")?.file.size == 9 && known.count == 3)
        known.remember(Self.entry("e"))
        #expect(known.entry(id: "b") == nil && known.entry(id: "c") != nil && known.entry(id: "e") != nil)
    }

    @Test func aForgottenDownloadIsGoneAndARememberedAgainOneIsNotDroppedForItsOldPlace() {
        var known = KnownCompletions(capacity: 2)
        known.remember(Self.entry("a"))
        known.remember(Self.entry("b"))
        known.forget("a")
        #expect(known.entry(id: "a") == nil && known.entry(leaseKey: "http://o.test/a") == nil && known.count == 1)
        known.remember(Self.entry("a"))
        known.remember(Self.entry("c"))
        #expect(known.entry(id: "b") == nil, "b is now the oldest")
        #expect(known.entry(id: "a") != nil && known.entry(id: "c") != nil)

        // A key that now names another download answers with that one.
        known.remember(Self.entry("x", key: "http://o.test/c"))
        #expect(known.entry(leaseKey: "http://o.test/c")?.id == "x")
        known.forget("c")
        #expect(known.entry(leaseKey: "http://o.test/c")?.id == "x", "forgetting c leaves x's key alone")
    }

    @Test func staysBoundedThroughManyForgetsAndRemembers() {
        var known = KnownCompletions(capacity: 4)
        for n in 0..<10_000 {
            known.remember(Self.entry("d\(n % 7)"))
            if n % 3 == 0 { known.forget("d\((n + 2) % 7)") }
        }
        #expect(known.count <= 4)
    }
}
