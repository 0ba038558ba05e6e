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
