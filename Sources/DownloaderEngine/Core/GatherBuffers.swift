import Foundation

/// The gathering buffers of a crew's fetches (`WriteBatching`): taken at a fetch's first body byte,
/// given back when it ends, and kept (at most `keep`) for the next fetches: a new fetch every 8 MiB
/// would otherwise fault a fresh megabyte in each time. Thread-safe.
final class GatherBuffers: @unchecked Sendable {
    let capacity: Int
    private let keep: Int
    private let lock = NSLock()
    private var spare: [UnsafeMutableRawBufferPointer] = []

    init(capacity: Int, keep: Int) {
        self.capacity = max(1, capacity)
        self.keep = max(0, keep)
    }

    deinit {
        for buffer in spare { buffer.deallocate() }
    }

    /// A buffer of `capacity` bytes: a kept one, or a new one.
    func take() -> UnsafeMutableRawBufferPointer {
        lock.withLock { spare.popLast() }
            ?? UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 4096)
    }

    /// Kept for the next fetch, or freed when `keep` are kept already.
    func giveBack(_ buffer: UnsafeMutableRawBufferPointer) {
        let kept = lock.withLock {
            guard spare.count < keep else { return false }
            spare.append(buffer)
            return true
        }
        if !kept { buffer.deallocate() }
    }
}
