import Dispatch

/// What a whole answer repeats of the bytes kept: an origin that ignores `Range` answered a resume
/// with `200` under the kept version's strong ETag (`ResumePlan`), so its first `count` bytes are
/// the kept ones. They are dropped instead of written again (readers of the file and its version
/// go on undisturbed), and checked first: their SHA-256 against the kept bytes'. A server whose
/// tag stays while its bytes change is caught there, before a byte of its answer is in the file.
///
/// `take` is called on the transfer thread every download shares, so the hashing runs on a queue
/// of its own: the bytes are copied into at most `depth` buffers of `bufferSize`, and the transfer
/// waits only when all are out, and for the last one at the end. One caller thread at a time.
final class KeptBytesSkip: @unchecked Sendable {
    enum Step: Equatable {
        /// More of the kept bytes are still to come.
        case skipping
        /// All of them came, and they are the kept bytes: the rest of the answer goes on after them.
        case same
        /// All of them came, and they are other bytes: another version under the same tag.
        case differs
    }

    static let bufferSize = 1 << 20
    static let depth = 3

    /// Bytes still to skip.
    private(set) var remaining: Int64
    private let expected: String
    /// Used on `queue` until the last bytes came, then (after it drained) by the caller.
    private let hasher = SHA256Hasher()
    private let queue = DispatchQueue(label: "kept-bytes.hash")
    /// Buffers that may exist: the one being filled and those queued.
    private let buffers = DispatchSemaphore(value: depth)
    private var filling: UnsafeMutableRawBufferPointer?
    private var filled = 0

    /// `count`: the bytes kept; `keptSHA256`: their digest (lower-case hex).
    init(count: Int64, keptSHA256: String) {
        remaining = max(0, count)
        expected = keptSHA256
    }

    deinit {
        // Queued buffers are freed where they are hashed; this one never went.
        if let filling {
            filling.deallocate()
            buffers.signal()
        }
    }

    /// Takes what is still to skip from the front of `bytes`: how many were taken, and where the
    /// check stands once they are.
    func take(_ bytes: UnsafeRawBufferPointer) -> (taken: Int, step: Step) {
        let taken = Int(min(Int64(bytes.count), remaining))
        var rest = UnsafeRawBufferPointer(rebasing: bytes[..<taken])
        while !rest.isEmpty {
            let buffer = filling ?? newBuffer()
            let n = min(rest.count, Self.bufferSize - filled)
            (buffer.baseAddress! + filled).copyMemory(from: rest.baseAddress!, byteCount: n)
            filled += n
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if filled == Self.bufferSize { submit() }
        }
        remaining -= Int64(taken)
        guard remaining == 0 else { return (taken, .skipping) }
        if filled > 0 { submit() }
        queue.sync {}
        return (taken, hasher.hexDigest() == expected ? .same : .differs)
    }

    private func newBuffer() -> UnsafeMutableRawBufferPointer {
        buffers.wait()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 16)
        filling = buffer
        return buffer
    }

    private func submit() {
        guard let filling else { return }
        nonisolated(unsafe) let buffer = filling  // The queue's alone from here.
        let count = filled
        self.filling = nil
        filled = 0
        queue.async { [hasher, buffers] in
            hasher.update(UnsafeRawBufferPointer(start: buffer.baseAddress, count: count))
            buffer.deallocate()
            buffers.signal()
        }
    }
}
