/// What a whole answer repeats of the bytes kept: an origin that ignores `Range` answered a resume
/// with `200` under the kept version's strong ETag (`ResumePlan`), so its first `count` bytes are
/// the kept ones. They are dropped instead of written again (readers of the file and its version
/// go on undisturbed), and checked first: their SHA-256 against the kept bytes'. A server whose
/// tag stays while its bytes change is caught there, before a byte of its answer is in the file.
/// One thread at a time (the attempt's transfer thread).
final class KeptBytesSkip: @unchecked Sendable {
    enum Step: Equatable {
        /// More of the kept bytes are still to come.
        case skipping
        /// All of them came, and they are the kept bytes: the rest of the answer goes on after them.
        case same
        /// All of them came, and they are other bytes: another version under the same tag.
        case differs
    }

    /// Bytes still to skip.
    private(set) var remaining: Int64
    private let expected: String
    private let hasher = SHA256Hasher()

    /// `count`: the bytes kept; `keptSHA256`: their digest (lower-case hex).
    init(count: Int64, keptSHA256: String) {
        remaining = max(0, count)
        expected = keptSHA256
    }

    /// Takes what is still to skip from the front of `bytes`: how many were taken, and where the
    /// check stands once they are.
    func take(_ bytes: UnsafeRawBufferPointer) -> (taken: Int, step: Step) {
        let taken = Int(min(Int64(bytes.count), remaining))
        hasher.update(UnsafeRawBufferPointer(rebasing: bytes[..<taken]))
        remaining -= Int64(taken)
        guard remaining == 0 else { return (taken, .skipping) }
        return (taken, hasher.hexDigest() == expected ? .same : .differs)
    }
}
