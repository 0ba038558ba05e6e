/// Collects response header lines as libcurl hands them over (one line per call, every hop of a
/// redirect chain and every 1xx in turn) and says when the FINAL hop's head is complete.
/// Pure: no libcurl, so a table test covers it.
struct ResponseHeadCollector: Sendable {
    enum Event: Equatable {
        /// Nothing to do yet.
        case none
        /// A hop ended that libcurl will not deliver a body for (1xx, or a 3xx it follows).
        case interimHead(status: Int)
        /// The final hop's head is complete: names lower-cased, values in wire order.
        case finalHead(status: Int, headers: [String: [String]])
        /// The head is malformed or over the bounds.
        case invalid(String)
    }

    /// Whether libcurl follows redirects (a 3xx with `Location` is then not the final hop).
    var followsRedirects: Bool

    /// Bytes of header lines accepted per hop.
    static let maxHeadBytes = 256 * 1024
    /// Header fields accepted per hop.
    static let maxFields = 500

    private var status: Int?
    private var fields: [(name: String, value: String)] = []
    private var bytes = 0

    init(followsRedirects: Bool) {
        self.followsRedirects = followsRedirects
    }

    /// Feeds one line (with or without its CRLF).
    mutating func consume(_ rawLine: [UInt8]) -> Event {
        var line = rawLine[...]
        while let last = line.last, last == 10 || last == 13 { line = line.dropLast() }

        if line.starts(with: Array("HTTP/".utf8)) {
            // A new hop: forget everything of the previous one.
            fields.removeAll(keepingCapacity: true)
            bytes = rawLine.count
            let parts = line.split(separator: 32, maxSplits: 2, omittingEmptySubsequences: true)
            guard parts.count >= 2, parts[1].count == 3,
                  let code = Int(String(decoding: parts[1], as: UTF8.self)), (100...599).contains(code) else {
                status = nil
                return .invalid("malformed status line")
            }
            status = code
            return .none
        }
        guard let status else { return .invalid("header line before a status line") }
        bytes += rawLine.count
        guard bytes <= Self.maxHeadBytes else { return .invalid("response head larger than \(Self.maxHeadBytes) bytes") }

        if line.isEmpty {
            self.status = nil
            var headers = collectedHeaders()
            let redirectFollowed = followsRedirects && (300..<400).contains(status) && Self.location(in: headers) != nil
            if status < 200 || redirectFollowed { return .interimHead(status: status) }
            // A transfer coding frames the body, whatever Content-Length says (RFC 9112 §6.3; libcurl
            // reads it so): the length is no size to hold the body to.
            if headers["transfer-encoding"] != nil { headers["content-length"] = nil }
            if let lengths = headers["content-length"] {
                // Framing two readers could disagree on (RFC 9112 §6.3): libcurl reads the last.
                guard let length = Self.contentLength(lengths) else { return .invalid("conflicting or malformed Content-Length") }
                headers["content-length"] = [length]
            }
            return .finalHead(status: status, headers: headers)
        }
        if let first = line.first, first == 32 || first == 9 {
            // obs-fold: a continuation of the previous field's value.
            guard !fields.isEmpty else { return .invalid("continuation line without a field") }
            fields[fields.count - 1].value += " " + trimmed(line)
            return .none
        }
        guard let colon = line.firstIndex(of: 58), colon > line.startIndex else {
            return .invalid("header line without a name")
        }
        guard fields.count < Self.maxFields else { return .invalid("more than \(Self.maxFields) header fields") }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        let value = line[(colon + 1)...]
        // A Location's bytes beyond ASCII are percent-encoded, as libcurl sends them when it follows
        // one itself (decoded as UTF-8, a Latin-1 `é` would turn into U+FFFD: another URL).
        fields.append((name, name == "location" ? Self.percentEncodingNonASCII(Self.blanksTrimmed(value)) : trimmed(value)))
        return .none
    }

    static func percentEncodingNonASCII<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            if byte < 0x80 { out.append(byte) } else { out += [37, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]] }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The redirect target libcurl follows: the first `Location` that is not empty (it ignores an
    /// empty one, and then the 3xx is the final answer).
    static func location(in headers: [String: [String]]) -> String? {
        headers["location"]?.first { !$0.isEmpty }
    }

    /// The one length that every `Content-Length` field (and every comma-separated value in one)
    /// gives, digits only; nil when they differ or one is not a length.
    static func contentLength(_ values: [String]) -> String? {
        var length: String?
        for value in values {
            for part in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                let digits = blanksTrimmed(part)
                guard !digits.isEmpty, digits.allSatisfy({ (48...57).contains($0) }) else { return nil }
                // A length no 64-bit count holds is malformed, not absent (a body cut short would pass).
                guard let value = Int64(String(decoding: digits, as: UTF8.self)) else { return nil }
                let text = String(value)
                guard length == nil || length == text else { return nil }
                length = text
            }
        }
        return length
    }

    private func collectedHeaders() -> [String: [String]] {
        var headers: [String: [String]] = [:]
        for field in fields { headers[field.name, default: []].append(field.value) }
        return headers
    }

    private func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: Self.blanksTrimmed(bytes), as: UTF8.self)
    }

    /// Without leading and trailing spaces and tabs.
    private static func blanksTrimmed<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        var slice = bytes[...]
        while let first = slice.first, first == 32 || first == 9 { slice = slice.dropFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice = slice.dropLast() }
        return slice
    }
}
