/// Incremental, pure HTTP/1.x request-head parser: bytes in, `needMoreData` / head / invalid out.
/// It keeps only a scan offset between calls so trickled input is not rescanned from the start.
struct RequestParser {
    let limits: ParserLimits
    /// Bytes already known not to contain the end of the head (relative to the buffer start).
    private var scanned = 0
    /// Index of the request line's LF once seen, else -1.
    private var requestLineEnd = -1

    init(limits: ParserLimits) {
        self.limits = limits
    }

    /// Forget progress; call after a head was consumed from the buffer.
    mutating func reset() {
        scanned = 0
        requestLineEnd = -1
    }

    /// Bytes of the empty lines (CRLF) `buffer` starts with, skipped before a request line (RFC 9112
    /// §2.2): none more once `limit` bytes are skipped.
    static func emptyLines(_ buffer: UnsafeBufferPointer<UInt8>, upTo limit: Int) -> Int {
        var start = 0
        while start + 1 < buffer.count, buffer[start] == 13, buffer[start + 1] == 10, start < limit {
            start += 2
        }
        return start
    }

    mutating func parse(_ buffer: UnsafeBufferPointer<UInt8>) -> HeadParseResult {
        let n = buffer.count
        // Skip empty lines before the request line (RFC 9112 §2.2), bounded by the line limit.
        let start = Self.emptyLines(buffer, upTo: limits.maxRequestLineBytes)
        // Find the blank line that ends the head.
        var end = -1
        var i = max(start, scanned - 3)
        while i + 3 < n {
            if buffer[i + 3] != 10 { i += (buffer[i + 3] == 13 ? 1 : 4); continue }
            if buffer[i] == 13, buffer[i + 1] == 10, buffer[i + 2] == 13 { end = i + 4; break }
            i += 1
        }
        if end < 0 {
            scanned = max(scanned, n)
            // Enforce limits on what is buffered so far; check the request line once it is complete.
            if requestLineEnd < 0 {
                var j = start
                let lineLimit = min(n, start + limits.maxRequestLineBytes + 2)
                while j < lineLimit { if buffer[j] == 10 { requestLineEnd = j; break }; j += 1 }
                if requestLineEnd < 0 {
                    if n - start > limits.maxRequestLineBytes + 1 {
                        return .invalid(ParseFailure(status: 414, reason: "request line too long"))
                    }
                    return .needMoreData
                }
                if case .failure(let f) = Self.parseRequestLine(UnsafeBufferPointer(rebasing: buffer[start...requestLineEnd]), limits: limits) {
                    return .invalid(f)
                }
            }
            if n - (requestLineEnd + 1) > limits.maxHeaderBytes {
                return .invalid(ParseFailure(status: 431, reason: "header section too large"))
            }
            return .needMoreData
        }
        return Self.parseHead(UnsafeBufferPointer(rebasing: buffer[start..<end]), consumed: end, limits: limits)
    }

    /// Parses a complete head (request line through the blank line). Header semantics (Host,
    /// framing, keep-alive, Expect) are read from the bytes in the same pass that splits the fields.
    /// The result carries `consumed` (the whole head's length in the caller's buffer) when valid.
    static func parseHead(_ b: UnsafeBufferPointer<UInt8>, consumed: Int, limits: ParserLimits) -> HeadParseResult {
        func bad(_ reason: String, _ status: Int = 400) -> HeadParseResult {
            .invalid(ParseFailure(status: status, reason: reason))
        }
        var lineEnd = 0
        while b[lineEnd] != 10 { lineEnd += 1 }
        let requestLine: (method: String, target: String, major: Int, minor: Int)
        switch parseRequestLine(UnsafeBufferPointer(rebasing: b[0...lineEnd]), limits: limits) {
        case .success(let l): requestLine = l
        case .failure(let f): return .invalid(f)
        }
        let (method, target, major, minor) = requestLine

        // Header fields.
        let headerStart = lineEnd + 1
        if b.count - headerStart > limits.maxHeaderBytes { return bad("header section too large", 431) }
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(8)
        var semantics = HeaderSemantics()
        var p = headerStart
        while true {
            var e = p
            while b[e] != 10 { e += 1 }
            guard e > p, b[e - 1] == 13 else { return bad("header line must end with CRLF") }
            let fieldEnd = e - 1
            if fieldEnd == p { break }  // blank line
            if b[p] == 32 || b[p] == 9 { return bad("obsolete line folding") }
            if fields.count >= limits.maxHeaderCount { return bad("too many header fields", 431) }
            var colon = p
            while colon < fieldEnd, b[colon] != 58 { colon += 1 }
            guard colon < fieldEnd, colon > p else { return bad("header field without name or colon") }
            for k in p..<colon where !isTokenByte(b[k]) {
                return bad(b[k] == 32 || b[k] == 9 ? "whitespace before colon" : "invalid header name")
            }
            var vs = colon + 1, ve = fieldEnd
            while vs < ve, b[vs] == 32 || b[vs] == 9 { vs += 1 }
            while ve > vs, b[ve - 1] == 32 || b[ve - 1] == 9 { ve -= 1 }
            for k in vs..<ve {
                let c = b[k]
                if (c < 32 && c != 9) || c == 127 { return bad("control character in header value") }
            }
            let value = UnsafeBufferPointer(rebasing: b[vs..<ve])
            semantics.note(name: UnsafeBufferPointer(rebasing: b[p..<colon]), value: value, valueOffset: vs)
            fields.append((name: String(decoding: UnsafeBufferPointer(rebasing: b[p..<colon]), as: UTF8.self),
                           value: String(decoding: value, as: UTF8.self)))
            p = e + 1
        }
        return interpret(method: method, target: target, major: major, minor: minor, headers: HTTPHeaders(fields),
                         semantics: semantics, head: b, consumed: consumed, limits: limits)
    }

    /// Parses a request line including its terminating LF.
    static func parseRequestLine(_ b: UnsafeBufferPointer<UInt8>, limits: ParserLimits)
        -> Result<(method: String, target: String, major: Int, minor: Int), ParseFailure> {
        func bad(_ reason: String, _ status: Int = 400) -> Result<(method: String, target: String, major: Int, minor: Int), ParseFailure> {
            .failure(ParseFailure(status: status, reason: reason))
        }
        let lineEnd = b.count - 1
        guard lineEnd > 0, b[lineEnd - 1] == 13 else { return bad("request line must end with CRLF") }
        let n = lineEnd - 1
        if n > limits.maxRequestLineBytes { return bad("request line too long", 414) }
        // method SP request-target SP HTTP-version
        var i = 0
        while i < n, isTokenByte(b[i]) { i += 1 }
        let methodEnd = i
        guard methodEnd > 0, i < n, b[i] == 32 else {
            return bad(i < n && b[i] != 32 ? "invalid method" : "malformed request line")
        }
        i += 1
        let targetStart = i
        while i < n, isTargetByte(b[i]) { i += 1 }
        let targetEnd = i
        guard targetEnd > targetStart else { return bad("malformed request line") }
        if i == n { return bad("HTTP/0.9 is not supported", 505) }
        guard b[i] == 32 else { return bad("invalid request target") }
        i += 1
        guard n - i == 8, b[i] == 72, b[i + 1] == 84, b[i + 2] == 84, b[i + 3] == 80, b[i + 4] == 47, b[i + 6] == 46,
              (48...57).contains(b[i + 5]), (48...57).contains(b[i + 7]) else { return bad("malformed HTTP version") }
        let major = Int(b[i + 5] - 48), minor = Int(b[i + 7] - 48)
        guard major == 1 else { return bad("HTTP/\(major).\(minor) is not supported", 505) }
        return .success((methodString(UnsafeBufferPointer(rebasing: b[0..<methodEnd])),
                         String(decoding: UnsafeBufferPointer(rebasing: b[targetStart..<targetEnd]), as: UTF8.self),
                         major, minor))
    }

    /// A `Host` value: `uri-host [ ":" port ]` (RFC 9112 §3.2: anything else is `400`), its bytes
    /// those of a reg-name, an IPv4 address or an IP literal and a port; empty is allowed.
    static func isValidHost(_ host: String) -> Bool {
        host.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || "-._~%!$&'()*+,;=:[]".utf8.contains(c)
        }
    }

    /// Header semantics: Host, framing, keep-alive, Expect, from what `HeaderSemantics` noted.
    static func interpret(method: String, target: String, major: Int, minor: Int, headers: HTTPHeaders,
                          semantics h: HeaderSemantics, head b: UnsafeBufferPointer<UInt8>, consumed: Int,
                          limits: ParserLimits) -> HeadParseResult {
        func bad(_ reason: String, _ status: Int = 400) -> HeadParseResult {
            .invalid(ParseFailure(status: status, reason: reason))
        }
        if minor >= 1 && h.hostCount == 0 { return bad("missing Host header") }
        if h.hostCount > 1 { return bad("repeated Host header") }
        if let host = headers["Host"], !isValidHost(host) { return bad("invalid Host header") }
        if h.lengthCount > 0 && h.encodingCount > 0 { return bad("both Content-Length and Transfer-Encoding") }
        var framing = BodyFraming.none
        if h.lengthCount > 1 { return bad("repeated Content-Length") }
        if h.lengthCount == 1 {
            let text = UnsafeBufferPointer(rebasing: b[h.lengthValue])
            guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
                return bad("invalid Content-Length")
            }
            let length = text.reduce(0) { $0 * 10 + Int($1 - 48) }
            if length > limits.maxBodyBytes { return bad("request body too large", 413) }
            framing = length > 0 ? .length(length) : .none
        }
        if h.encodingCount > 0 {
            guard h.encodingCount == 1, h.encodingIsChunked, minor >= 1 else {
                return bad("unsupported Transfer-Encoding")
            }
            framing = .chunked
        }
        var (target, headers) = (target, headers)
        switch RequestTarget.classify(target) {
        case .asSent: break
        case .absolute(let path, let host):
            target = path
            if headers["Host"] != nil { headers["Host"] = host }  // In its place: never a field more than was read.
        case .invalid(let reason): return bad(reason)
        }
        let keepAlive = h.connectionClose ? false : (minor == 0 ? h.connectionKeepAlive : true)
        let request = Request(method: method, target: target, version: (major, minor), headers: headers)
        let head = RequestHead(request: consume request, keepAlive: keepAlive, framing: framing,
                               expectsContinue: h.expectContinue && minor >= 1)
        return .head(consume head, consumed: consumed)
    }

    /// The method as a String; the common ones are literals (no validation, no storage).
    @inline(__always)
    static func methodString(_ m: UnsafeBufferPointer<UInt8>) -> String {
        if m.count == 3, m[0] == 71, m[1] == 69, m[2] == 84 { return "GET" }
        if m.count == 4, m[0] == 80, m[1] == 79, m[2] == 83, m[3] == 84 { return "POST" }
        if m.count == 4, m[0] == 72, m[1] == 69, m[2] == 65, m[3] == 68 { return "HEAD" }
        return String(decoding: m, as: UTF8.self)
    }

    /// RFC 9110 tchar.
    @inline(__always)
    static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case 48...57, 65...90, 97...122: true
        case 33, 35, 36, 37, 38, 39, 42, 43, 45, 46, 94, 95, 96, 124, 126: true
        default: false
        }
    }

    /// Visible ASCII (and obs-text) allowed in a request-target.
    @inline(__always)
    /// A byte a request target may hold: visible ASCII and above, but not `#` (a fragment is never
    /// sent, RFC 9112 §3.2; a proxy or library forwarding the target would cut it there, and
    /// every parameter after it with it).
    static func isTargetByte(_ c: UInt8) -> Bool { c > 32 && c != 127 && c != UInt8(ascii: "#") }
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
