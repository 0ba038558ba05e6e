import Foundation

/// The output queue of one connection: byte buffers and file ranges, with the number of queued
/// bytes tracked against the high/low watermarks. Pure bookkeeping; `Connection` does the I/O.
struct PendingWrites {
    enum Item {
        case bytes([UInt8], offset: Int)
        /// A file range sent with sendfile; the fd is owned by the queue and closed when done.
        case file(fd: Int32, offset: off_t, end: off_t)
        /// A range of a file others may share (a push stream tailing a growing file).
        case sharedFile(ReadableFile, offset: off_t, end: off_t)
    }

    private(set) var items: [Item] = []
    private var head = 0
    /// Bytes queued and not yet written (file ranges included).
    private(set) var pendingBytes = 0
    let highWatermark: Int
    let lowWatermark: Int

    init(highWatermark: Int, lowWatermark: Int) {
        self.highWatermark = highWatermark
        self.lowWatermark = lowWatermark
    }

    var isEmpty: Bool { head == items.count }
    var isAboveHighWatermark: Bool { pendingBytes > highWatermark }
    var isBelowLowWatermark: Bool { pendingBytes <= lowWatermark }
    var first: Item? { isEmpty ? nil : items[head] }

    mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        pendingBytes += bytes.count
        items.append(.bytes(bytes, offset: 0))
    }

    mutating func appendFile(fd: Int32, offset: off_t, end: off_t) {
        pendingBytes += Int(end - offset)
        items.append(.file(fd: fd, offset: offset, end: end))
    }

    /// Queues a range of `file`; a range that continues the last queued one of the same file extends it.
    mutating func appendSharedFile(_ file: ReadableFile, offset: off_t, end: off_t) {
        pendingBytes += Int(end - offset)
        if head < items.count, case .sharedFile(let last, let lastOffset, let lastEnd) = items[items.count - 1],
           last === file, lastEnd == offset {
            items[items.count - 1] = .sharedFile(file, offset: lastOffset, end: end)
            return
        }
        items.append(.sharedFile(file, offset: offset, end: end))
    }

    /// Records that `count` bytes of the first item were written; pops it when finished.
    mutating func advance(by count: Int) {
        pendingBytes -= count
        switch items[head] {
        case .bytes(let bytes, let offset):
            if offset + count >= bytes.count { popFirst() } else { items[head] = .bytes(bytes, offset: offset + count) }
        case .file(let fd, let offset, let end):
            let next = offset + off_t(count)
            if next >= end {
                close(fd)
                popFirst()
            } else {
                items[head] = .file(fd: fd, offset: next, end: end)
            }
        case .sharedFile(let file, let offset, let end):
            let next = offset + off_t(count)
            if next >= end { popFirst() } else { items[head] = .sharedFile(file, offset: next, end: end) }
        }
    }

    private mutating func popFirst() {
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 4)
            head = 0
        } else if head >= 16 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    /// Drops everything (closing file descriptors); used when the connection dies.
    mutating func removeAll() {
        for item in items[head...] {
            if case .file(let fd, _, _) = item { close(fd) }
        }
        items = []
        head = 0
        pendingBytes = 0
    }
}
