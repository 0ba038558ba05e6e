/// Serialises a response head; the server's own framing headers replace any the handler set.
enum ResponseHeadEncoder {
    enum Framing: Equatable {
        /// No body and no Content-Length (1xx, 204, 304).
        case none
        case length(Int64)
        case chunked
        /// Body ends when the connection closes (streams on HTTP/1.0).
        case closeDelimited
    }

    /// Header names the server owns.
    static func isServerOwned(_ name: String) -> Bool {
        switch name.utf8.count {
        case 4: return name.caseInsensitiveEquals("Date")
        case 10: return name.caseInsensitiveEquals("Connection")
        case 14: return name.caseInsensitiveEquals("Content-Length")
        case 17: return name.caseInsensitiveEquals("Transfer-Encoding")
        default: return false
        }
    }

    /// A field the handler set that cannot break the head: token-ish name, no CR/LF/NUL in the value.
    @inline(__always)
    static func isSafe(name: String, value: String) -> Bool {
        for c in name.utf8 where c < 33 || c == 58 || c == 127 { return false }
        for c in value.utf8 where c == 13 || c == 10 || c == 0 { return false }
        return !name.isEmpty
    }

    static func statusLine(_ status: Int) -> [UInt8] {
        Array("HTTP/1.1 \(status) \(HTTPStatus.reason(status))\r\n".utf8)
    }

    /// Appends the decimal digits of a non-negative number.
    @inline(__always)
    static func appendDecimal<Out: HeadOutput>(_ value: Int64, to out: inout Out) {
        if value < 10 {
            out.append(byte: UInt8(48 + value))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch: enough for Int64
        var count = 0
        var v = UInt64(value)
        withUnsafeMutableBytes(of: &digits) { scratch in
            while v > 0 {
                scratch[23 - count] = UInt8(48 + v % 10)
                v /= 10
                count += 1
            }
            out.append(bytes: UnsafeBufferPointer(rebasing: scratch.bindMemory(to: UInt8.self)[(24 - count)...]))
        }
    }

    /// Appends a literal's bytes (static storage: no array, no reference counting).
    @inline(__always)
    static func append<Out: HeadOutput>(_ literal: StaticString, to out: inout Out) {
        out.append(bytes: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends a string's UTF-8 bytes, from contiguous storage when the string has it.
    @inline(__always)
    private static func append<Out: HeadOutput>(_ text: String, to out: inout Out) {
        if text.utf8.withContiguousStorageIfAvailable({ out.append(bytes: $0) }) == nil {
            let copy = Array(text.utf8)
            copy.withUnsafeBufferPointer { out.append(bytes: $0) }
        }
    }

    /// Appends the head: status line, the handler's fields (minus server-owned and unsafe ones),
    /// `Date`, framing and `Connection`. `date` is the 29-byte IMF-fixdate.
    static func encode<Out: HeadOutput>(status: Int, headers: HTTPHeaders, date: UnsafeBufferPointer<UInt8>,
                                        framing: Framing, keepAlive: Bool, into out: inout Out) {
        if status == 200 {
            append("HTTP/1.1 200 OK\r\n", to: &out)
        } else {
            statusLine(status).withUnsafeBufferPointer { out.append(bytes: $0) }
        }
        headers.fields.withUnsafeBufferPointer { fields in
            for i in fields.indices where !isServerOwned(fields[i].name) {
                // Never let a handler inject a line break into the head.
                guard isSafe(name: fields[i].name, value: fields[i].value) else { continue }
                append(fields[i].name, to: &out)
                out.append(byte: 58)
                out.append(byte: 32)
                append(fields[i].value, to: &out)
                out.append(byte: 13)
                out.append(byte: 10)
            }
        }
        append("Date: ", to: &out)
        out.append(bytes: date)
        switch framing {
        case .none, .closeDelimited: break
        case .length(let n):
            append("\r\nContent-Length: ", to: &out)
            appendDecimal(n, to: &out)
        case .chunked:
            append("\r\nTransfer-Encoding: chunked", to: &out)
        }
        if keepAlive {
            append("\r\nConnection: keep-alive\r\n\r\n", to: &out)
        } else {
            append("\r\nConnection: close\r\n\r\n", to: &out)
        }
    }

    /// The framing line and trailer of one chunk around `count` payload bytes.
    static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 12)
        out.append(contentsOf: String(bytes.count, radix: 16).utf8)
        out.append(13); out.append(10)
        out.append(contentsOf: bytes)
        out.append(13); out.append(10)
        return out
    }

    /// The framing line before `count` payload bytes sent separately (a file range); `crlf` follows them.
    static func chunkHeader(_ count: Int) -> [UInt8] {
        Array(String(count, radix: 16).utf8) + [13, 10]
    }

    static let crlf: [UInt8] = [13, 10]
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
    static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
}

/// Where `ResponseHeadEncoder` writes: a growing array, or `RawOutput` over loop-owned memory.
protocol HeadOutput {
    mutating func append(bytes: UnsafeBufferPointer<UInt8>)
    mutating func append(byte: UInt8)
}

extension Array: HeadOutput where Element == UInt8 {
    @inline(__always)
    mutating func append(bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
    @inline(__always)
    mutating func append(byte: UInt8) { append(byte) }
}

/// A fixed-capacity output over memory someone else owns (the loop's write buffer): plain
/// copies, no array bookkeeping. `overflowed` once something did not fit (the caller falls back).
struct RawOutput: HeadOutput {
    let base: UnsafeMutablePointer<UInt8>
    let capacity: Int
    private(set) var count = 0
    private(set) var overflowed = false

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        capacity = buffer.count
    }

    @inline(__always)
    mutating func append(bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, !overflowed else { return }
        guard bytes.count <= capacity - count else {
            overflowed = true
            return
        }
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func append(byte: UInt8) {
        guard count < capacity, !overflowed else {
            overflowed = true
            return
        }
        base[count] = byte
        count += 1
    }

    /// What was written.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}
