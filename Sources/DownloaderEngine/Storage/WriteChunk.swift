/// Bytes of one buffer handed to the `WritePipeline`: `count` bytes from `offset` in `buffer`, to
/// be hashed and written through `file` so that the file then ends at `end`. A buffer may be
/// handed over in several slices (a followed download hands over each append at once); only the
/// last slice of a buffer, `releasesBuffer`, gives the buffer back once it is hashed and written.
final class WriteChunk {
    let buffer: UnsafeMutableRawBufferPointer
    let offset: Int
    let count: Int
    /// File offset after the chunk.
    let end: Int64
    let file: InPlaceWrites
    let releasesBuffer: Bool
    /// Bytes of it in the file (by the write lane, or the owner writing what a failure left).
    var written = 0
    var then: [WritePipeline.Written] = []

    init(buffer: UnsafeMutableRawBufferPointer, offset: Int, count: Int, end: Int64, file: InPlaceWrites, releasesBuffer: Bool) {
        self.buffer = buffer
        self.offset = offset
        self.count = count
        self.end = end
        self.file = file
        self.releasesBuffer = releasesBuffer
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + count)]) }

    /// The bytes not yet in the file, and the file offset they go to.
    var unwritten: (base: UnsafeRawPointer, count: Int, at: Int64)? {
        guard let base = buffer.baseAddress, written < count else { return nil }
        return (UnsafeRawPointer(base + offset + written), count - written, end - Int64(count - written))
    }
}
