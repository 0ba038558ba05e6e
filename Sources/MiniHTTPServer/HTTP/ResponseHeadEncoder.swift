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

    private static let status200: [UInt8] = Array("HTTP/1.1 200 OK\r\n".utf8)

    static func statusLine(_ status: Int) -> [UInt8] {
        status == 200 ? status200 : Array("HTTP/1.1 \(status) \(HTTPStatus.reason(status))\r\n".utf8)
    }

    /// Appends the decimal digits of a non-negative number.
    @inline(__always)
    static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
        if value < 10 {
            out.append(UInt8(48 + value))
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
            out.append(contentsOf: scratch[(24 - count)...])
        }
    }

    private static let dateName: [UInt8] = Array("Date: ".utf8)
    private static let contentLengthName: [UInt8] = Array("\r\nContent-Length: ".utf8)
    private static let chunkedLine: [UInt8] = Array("\r\nTransfer-Encoding: chunked".utf8)
    private static let keepAliveEnd: [UInt8] = Array("\r\nConnection: keep-alive\r\n\r\n".utf8)
    private static let closeEnd: [UInt8] = Array("\r\nConnection: close\r\n\r\n".utf8)

    /// Appends a string's UTF-8 bytes, from contiguous storage when the string has it.
    @inline(__always)
    private static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    static func encode(status: Int, headers: HTTPHeaders, date: [UInt8], framing: Framing, keepAlive: Bool,
                       into out: inout [UInt8]) {
        out.append(contentsOf: statusLine(status))
        for field in headers.fields where !isServerOwned(field.name) {
            // Never let a handler inject a line break into the head.
            guard isSafe(name: field.name, value: field.value) else { continue }
            append(field.name, to: &out)
            out.append(58)
            out.append(32)
            append(field.value, to: &out)
            out.append(13)
            out.append(10)
        }
        out.append(contentsOf: dateName)
        out.append(contentsOf: date)
        switch framing {
        case .none, .closeDelimited: break
        case .length(let n):
            out.append(contentsOf: contentLengthName)
            appendDecimal(n, to: &out)
        case .chunked:
            out.append(contentsOf: chunkedLine)
        }
        out.append(contentsOf: keepAlive ? keepAliveEnd : closeEnd)
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

    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
    static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
}
