/// A caller's request headers for a private origin (`"headers"` of `POST /downloads`): checked
/// against the rules of issue 15 and kept in a canonical form. Pure. The values are secrets: they
/// go to the origin and nowhere else (never a log, a snapshot, an error message or the state
/// store; only their keyed hash, `CoalescingKey`, is kept). Messages name a header only when it is
/// a well-formed field name, never a value.
public struct CallerHeaders: Sendable, Equatable {
    /// At most this many headers…
    public static let maxCount = 16
    /// …with at most this many bytes of names and values together.
    public static let maxBytes = 8 * 1024

    /// Names a caller may not set, case-folded: framing, hop-by-hop and those the engine sets itself.
    static let refusedNames: Set<String> = [
        "host", "range", "accept-encoding", "expect", "te", "trailer", "transfer-encoding", "upgrade",
        "connection", "keep-alive",
    ]
    /// Refused prefixes, case-folded (`If-*`, `Content-*`, `Proxy-*`).
    static let refusedPrefixes = ["if-", "content-", "proxy-"]

    /// The headers sorted by case-folded name (each name as the caller spelled it).
    public let fields: [(name: String, value: String)]

    public static func == (a: CallerHeaders, b: CallerHeaders) -> Bool {
        a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Checks a request's `headers` (`DownloadRequest.headers`), as `validate(_:)` does.
    public static func validate(_ headers: [String: String]) -> Result<CallerHeaders, EngineError> {
        validate(headers.map { (name: $0.key, value: $0.value) })
    }

    /// Checks `fields` (any order); an empty list is no headers at all.
    public static func validate(_ fields: [(name: String, value: String)]) -> Result<CallerHeaders, EngineError> {
        guard fields.count <= maxCount else {
            return .failure(.invalidHeaders("at most \(maxCount) headers are accepted, not \(fields.count)"))
        }
        let bytes = fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        guard bytes <= maxBytes else {
            return .failure(.invalidHeaders("the headers' names and values exceed \(maxBytes) bytes"))
        }
        var seen: Set<String> = []
        for (name, value) in fields {
            guard isFieldName(name) else { return .failure(.invalidHeaders("a header name is not a valid field name")) }
            let folded = name.lowercased()
            if refusedNames.contains(folded) || refusedPrefixes.contains(where: { folded.hasPrefix($0) }) {
                return .failure(.invalidHeaders("the header \(name) may not be set by a caller"))
            }
            guard seen.insert(folded).inserted else {
                return .failure(.invalidHeaders("the header \(name) is given more than once (names are case-insensitive)"))
            }
            guard isFieldValue(value) else {
                return .failure(.invalidHeaders("the value of \(name) is not a valid field value (empty, control characters, or white space at an end)"))
            }
        }
        let sorted = fields.sorted { $0.name.lowercased() < $1.name.lowercased() }
        return .success(CallerHeaders(fields: sorted.map { (name: $0.name, value: $0.value) }))
    }

    private init(fields: [(name: String, value: String)]) {
        self.fields = fields
    }

    public var isEmpty: Bool { fields.isEmpty }

    /// What the keyed hash covers: `name:value\r\n` per header, names case-folded, sorted by name.
    /// Unambiguous: a name holds no `:` and a value no CR or LF.
    var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        for (name, value) in fields {
            out += name.lowercased().utf8
            out.append(UInt8(ascii: ":"))
            out += value.utf8
            out += [13, 10]
        }
        return out
    }

    /// RFC 9110 `token`.
    static func isFieldName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 256 && name.utf8.allSatisfy(CurlTransfer.isTokenByte)
    }

    /// RFC 9110 `field-value`, not empty: visible ASCII or obs-text, with spaces and tabs inside only.
    static func isFieldValue(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard let first = bytes.first, let last = bytes.last else { return false }
        func visible(_ b: UInt8) -> Bool { (0x21...0x7E).contains(b) || b >= 0x80 }
        return visible(first) && visible(last) && bytes.allSatisfy { visible($0) || $0 == 0x20 || $0 == 0x09 }
    }
}
