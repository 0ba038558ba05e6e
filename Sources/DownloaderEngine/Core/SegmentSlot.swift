import Foundation

/// A fetch's place in its crew: its handle once started; a cancel before that cancels it as it
/// starts.
final class SegmentSlot: @unchecked Sendable {
    private let lock = NSLock()
    private var handle: TransferHandle?
    private var cancelled = false

    func started(_ handle: TransferHandle) {
        let cancelNow = lock.withLock {
            self.handle = handle
            return cancelled
        }
        if cancelNow { handle.cancel() }
    }

    func cancel() {
        lock.withLock {
            cancelled = true
            return handle
        }?.cancel()
    }
}
