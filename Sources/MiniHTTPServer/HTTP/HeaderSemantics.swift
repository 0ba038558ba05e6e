/// What the request head's fields say about framing and the connection, collected from the raw
/// bytes while the parser splits the fields (no String comparisons on the hot path). Pure.
struct HeaderSemantics {
    var hostCount = 0
    var lengthCount = 0
    /// Byte range (in the head buffer) of the last Content-Length value.
    var lengthValue: Range<Int> = 0..<0
    var encodingCount = 0
    /// The last Transfer-Encoding value is exactly `chunked` (case-insensitive).
    var encodingIsChunked = false
    var connectionClose = false
    var connectionKeepAlive = false
    var expectContinue = false

    /// Notes one field; `valueOffset` is where `value` starts in the head buffer.
    @inline(__always)
    mutating func note(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, valueOffset: Int) {
        switch name.count {
        case 4 where Self.equals(name, "host"):
            hostCount += 1
        case 14 where Self.equals(name, "content-length"):
            lengthCount += 1
            lengthValue = valueOffset..<(valueOffset + value.count)
        case 17 where Self.equals(name, "transfer-encoding"):
            encodingCount += 1
            encodingIsChunked = value.count == 7 && Self.equals(value, "chunked")
        case 10 where Self.equals(name, "connection"):
            noteConnection(value)
        case 6 where Self.equals(name, "expect"):
            expectContinue = value.count == 12 && Self.equals(value, "100-continue")
        default:
            break
        }
    }

    /// `Connection` is a comma-separated token list; `close` and `keep-alive` matter.
    private mutating func noteConnection(_ value: UnsafeBufferPointer<UInt8>) {
        var start = 0
        while start <= value.count {
            var end = start
            while end < value.count, value[end] != 44 { end += 1 }
            var s = start, e = end
            while s < e, value[s] == 32 || value[s] == 9 { s += 1 }
            while e > s, value[e - 1] == 32 || value[e - 1] == 9 { e -= 1 }
            let token = UnsafeBufferPointer(rebasing: value[s..<e])
            if token.count == 5, Self.equals(token, "close") { connectionClose = true }
            if token.count == 10, Self.equals(token, "keep-alive") { connectionKeepAlive = true }
            start = end + 1
        }
    }

    /// ASCII case-insensitive comparison of `bytes` with a lowercase `literal` of letters, digits
    /// and '-' (lengths must already match).
    @inline(__always)
    static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let l = literal.utf8Start
        for i in 0..<bytes.count {
            let c = bytes[i], want = l[i]
            if c != want && !(want >= 97 && want <= 122 && c | 0x20 == want) { return false }
        }
        return true
    }
}
