import Testing
@testable import DownloaderEngine

/// The system source draws eight bytes at a time and hands out exactly what was asked for.
@Suite struct SystemRandomTests {
    @Test(arguments: [0, 1, 7, 8, 9, 16, 33])
    func givesTheCountAskedFor(_ count: Int) {
        #expect(SystemRandom().bytes(count).count == count)
        #expect(SystemRandom().hex(byteCount: count).utf8.count == 2 * count)
    }

    /// 16 384 bytes: every value should appear (a missing one has odds of about 256·e⁻⁶⁴), so a
    /// source stuck on some bits fails; 64 tokens must all differ.
    @Test func drawsCoverEveryByteValueAndDoNotRepeat() {
        var seen = Set<UInt8>()
        for _ in 0..<1_024 { seen.formUnion(SystemRandom().bytes(16)) }
        #expect(seen.count == 256)
        let tokens = (0..<64).map { _ in SystemRandom().hex(byteCount: 16) }
        #expect(Set(tokens).count == tokens.count)
    }
}
