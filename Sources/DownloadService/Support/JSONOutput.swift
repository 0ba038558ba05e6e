/// Where the JSON writers (`JSON.writeString`, …) put bytes: a growing array, or `FixedBytes` for
/// a line built in memory the caller owns (the access log's lines, on the stack).
protocol JSONOutput {
    mutating func append(byte: UInt8)
    mutating func append(bytes: UnsafeBufferPointer<UInt8>)
}

extension Array: JSONOutput where Element == UInt8 {
    @inline(__always)
    mutating func append(byte: UInt8) { append(byte) }
    @inline(__always)
    mutating func append(bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}

/// A fixed-capacity output: plain stores, no reference counting. What does not fit is not written
/// and sets `overflowed` (the caller writes the line again into an array).
struct FixedBytes: JSONOutput {
    let base: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0
    private(set) var overflowed = false

    init(_ base: UnsafeMutableBufferPointer<UInt8>) {
        self.base = base
    }

    /// The bytes written so far.
    var written: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: base[..<count]) }

    @inline(__always)
    mutating func append(byte: UInt8) {
        guard count < base.count else { overflowed = true; return }
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count <= base.count - count else { overflowed = true; return }
        if let source = bytes.baseAddress { (base.baseAddress! + count).update(from: source, count: bytes.count) }
        count += bytes.count
    }
}
