import Foundation
import Testing
@testable import DownloaderEngine

/// What a whole answer repeats of the kept bytes (`KeptBytesSkip`): taken from the front of what
/// arrives, however it is cut, and compared with the kept bytes' SHA-256 once all came.
@Suite struct KeptBytesSkipTests {
    static let kept = Array("the kept bytes of version one".utf8)
    static let rest = Array(", and the rest of it".utf8)

    @Test(arguments: [[1000], [29, 20], [1, 28, 20], [10, 25, 14], [3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 20]])
    func theKeptBytesAreTakenHoweverTheAnswerIsCut(_ cuts: [Int]) {
        let answer = Self.kept + Self.rest
        let skip = KeptBytesSkip(count: Int64(Self.kept.count), keptSHA256: SHA256Hasher.hex(Self.kept))
        var passed: [UInt8] = []
        var steps: [KeptBytesSkip.Step] = []
        var at = 0
        for cut in cuts where at < answer.count {
            let piece = Array(answer[at..<min(answer.count, at + cut)])
            at += piece.count
            if steps.last == .same { passed += piece; continue }  // The attempt stops asking once decided.
            let (taken, step) = piece.withUnsafeBytes { skip.take($0) }
            steps.append(step)
            passed += piece[taken...]
        }
        #expect(passed == Self.rest)
        #expect(steps.last == .same && steps.dropLast().allSatisfy { $0 == .skipping })
        #expect(skip.remaining == 0)
    }

    /// Kept bytes over several hashing buffers (3.5 MiB taken 700 KB at a time): the same verdict,
    /// whichever the buffers' boundaries; one flipped byte anywhere differs.
    @Test(arguments: [nil, 0, (1 << 20) - 1, 1 << 20, 3 << 20, (7 << 19) - 1])
    func keptBytesOverSeveralBuffers(_ flipped: Int?) {
        let kept = EngineFixture.body(7 << 19, seed: 5)
        var answer = kept + EngineFixture.body(1000, seed: 6)
        if let flipped { answer[flipped] ^= 0x80 }
        let skip = KeptBytesSkip(count: Int64(kept.count), keptSHA256: SHA256Hasher.hex(kept))
        var at = 0
        var step = KeptBytesSkip.Step.skipping
        while step == .skipping {
            let piece = Array(answer[at..<min(answer.count, at + 700_000)])
            let (taken, next) = piece.withUnsafeBytes { skip.take($0) }
            at += taken
            step = next
        }
        #expect(at == kept.count)
        #expect(step == (flipped == nil ? .same : .differs))
    }

    /// An answer cut while its kept bytes are being skipped: the skip goes with the attempt, its
    /// buffers with it (one being filled, others queued).
    @Test func aSkipLeftHalfWayGoesQuietly() {
        let kept = EngineFixture.body(5 << 20, seed: 7)
        var skip: KeptBytesSkip? = KeptBytesSkip(count: Int64(kept.count), keptSHA256: SHA256Hasher.hex(kept))
        let (taken, step) = Array(kept.prefix((5 << 19) + 3)).withUnsafeBytes { skip!.take($0) }
        #expect(taken == (5 << 19) + 3 && step == .skipping && skip?.remaining == Int64(kept.count - taken))
        skip = nil
    }

    @Test func otherBytesUnderTheSameTagDiffer() {
        var other = Self.kept
        other[Self.kept.count - 1] ^= 1
        let skip = KeptBytesSkip(count: Int64(Self.kept.count), keptSHA256: SHA256Hasher.hex(Self.kept))
        let first = Array(other.prefix(10)).withUnsafeBytes { skip.take($0) }
        #expect(first.taken == 10 && first.step == .skipping)
        let second = Array(other.dropFirst(10) + Self.rest).withUnsafeBytes { skip.take($0) }
        #expect(second.taken == Self.kept.count - 10 && second.step == .differs)
    }
}
