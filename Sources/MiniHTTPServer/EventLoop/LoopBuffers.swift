/// The reusable I/O buffers of one event loop, shared by every connection it owns (loop thread
/// only): nothing is allocated per read or per small response.
final class LoopBuffers {
    /// What every connection reads into (64 KiB); bytes a connection keeps are copied out.
    let read: UnsafeMutableRawBufferPointer = .allocate(byteCount: 64 * 1024, alignment: 16)
    /// A response head and small body, sent at once (64 KiB; whatever the socket does not take is
    /// copied out before the buffer is reused).
    let write: UnsafeMutableRawBufferPointer = .allocate(byteCount: 64 * 1024, alignment: 16)
    /// An array for responses larger than `write`, taken and given back (it comes back unique when
    /// the send completed).
    // @exclusivity(unchecked): loop-thread only, no overlapping access; skips the runtime exclusivity check per access.
    @exclusivity(unchecked)
    var scratch: [UInt8] = []

    deinit {
        read.deallocate()
        write.deallocate()
    }
}
