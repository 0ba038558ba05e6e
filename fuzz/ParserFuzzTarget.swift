// libFuzzer target for MiniHTTPServer's request parser and chunked decoder, built by
// `scripts/fuzz-parser` from the parser sources directly (no SwiftPM):
//   swiftc -sanitize=fuzzer,address -parse-as-library fuzz/*.swift <parser sources>
//
// Each input is a byte stream a client might send. It is run under two limit profiles (the
// defaults, and tiny limits derived from the input so limit paths are reached with short inputs)
// through `ConnectionModel`, a copy of how `Connection.process` drives the parser and decoder
// (pipelined requests, Content-Length and chunked bodies). Each run happens three ways: the whole
// input at once, split at input-derived points, and (short inputs) one byte at a time. The runs
// must agree, and every result must respect the limits and the anti-smuggling rules. Any violation
// is a trap, which libFuzzer reports as a crash and saves the input.

/// FNV-1a over the input: the seed for split points and the tiny limits.
func fuzzHash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
    return h
}

/// splitmix64, for split points.
struct FuzzRandom {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// Limits for one run: the parser's and the chunked decoder's.
struct FuzzProfile {
    var parser: ParserLimits
    var chunkLineBytes: Int
    var trailerBytes: Int

    static let defaults = FuzzProfile(parser: ParserLimits(), chunkLineBytes: 4096, trailerBytes: ParserLimits().maxHeaderBytes)

    static func tiny(_ h: UInt64) -> FuzzProfile {
        var limits = ParserLimits()
        limits.maxRequestLineBytes = 8 + Int(h % 64)
        limits.maxHeaderBytes = 8 + Int((h >> 8) % 256)
        limits.maxHeaderCount = 1 + Int((h >> 16) % 8)
        limits.maxBodyBytes = Int((h >> 24) % 128)
        return FuzzProfile(parser: limits, chunkLineBytes: 1 + Int((h >> 32) % 32), trailerBytes: Int((h >> 40) % 64))
    }
}

/// What the model saw, compared across feeding patterns.
enum FuzzEvent: Equatable {
    case head(String)
    case body([UInt8])
    /// A rejected request. Only the kind is compared: a limit can be noticed before the line end
    /// arrives (414) or with it (400 for a bare LF), and both answers are right.
    case invalid
}

func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz invariant violated: \(message())") }
}

/// A head in comparable form, after checking what a valid head must satisfy.
func describe(_ head: RequestHead, consumed: Int, available: Int, profile: FuzzProfile) -> String {
    let limits = profile.parser
    fuzzCheck(consumed > 0 && consumed <= available, "head consumed \(consumed) of \(available)")
    fuzzCheck(head.version.major == 1 && head.version.minor <= 9, "version \(head.version)")
    fuzzCheck(!head.method.isEmpty && head.method.utf8.allSatisfy(RequestParser.isTokenByte), "method \(head.method)")
    fuzzCheck(!head.target.isEmpty && head.target.utf8.allSatisfy(RequestParser.isTargetByte), "target")
    // Scalars, not UTF-8 bytes: an invalid byte sequence decodes to one U+FFFD (3 bytes) per run.
    fuzzCheck(head.method.unicodeScalars.count + head.target.unicodeScalars.count + 10 <= limits.maxRequestLineBytes,
              "request line over the limit")
    fuzzCheck(head.headers.count <= limits.maxHeaderCount, "\(head.headers.count) header fields")
    // The head is the request line, the fields and a blank line, after at most the skipped empty lines.
    fuzzCheck(consumed <= limits.maxRequestLineBytes + 2 + limits.maxHeaderBytes + limits.maxRequestLineBytes + 2,
              "head of \(consumed) bytes")
    var lengths = 0, encodings = 0, hosts = 0
    for (name, value) in head.headers.fields {
        fuzzCheck(!name.isEmpty && name.utf8.allSatisfy(RequestParser.isTokenByte), "field name \(name)")
        fuzzCheck(!value.utf8.contains { ($0 < 32 && $0 != 9) || $0 == 127 }, "control byte in a value")
        fuzzCheck(value.utf8.first != 32 && value.utf8.first != 9 && value.utf8.last != 32 && value.utf8.last != 9,
                  "untrimmed value")
        if name.caseInsensitiveEquals("Content-Length") { lengths += 1 }
        if name.caseInsensitiveEquals("Transfer-Encoding") { encodings += 1 }
        if name.caseInsensitiveEquals("Host") { hosts += 1 }
    }
    // Smuggling rules: one framing, stated once, unambiguously.
    fuzzCheck(lengths <= 1 && encodings <= 1 && hosts <= 1, "repeated framing or Host fields")
    fuzzCheck(!(lengths > 0 && encodings > 0), "Content-Length with Transfer-Encoding")
    fuzzCheck(head.version.minor == 0 || hosts == 1, "HTTP/1.1 without Host")
    switch head.framing {
    case .none:
        fuzzCheck(encodings == 0, "Transfer-Encoding without chunked framing")
        if let text = head.headers["Content-Length"] { fuzzCheck(Int(text) == 0 && text.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }, "ignored Content-Length \(text)") }
    case .length(let n):
        fuzzCheck(n > 0 && n <= limits.maxBodyBytes, "length \(n)")
        let text = head.headers["Content-Length"] ?? ""
        fuzzCheck(text.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } && Int(text) == n, "Content-Length \(text) read as \(n)")
    case .chunked:
        fuzzCheck(encodings == 1 && head.headers["Transfer-Encoding"]?.caseInsensitiveEquals("chunked") == true,
                  "chunked framing from \(head.headers["Transfer-Encoding"] ?? "nothing")")
        fuzzCheck(head.version.minor >= 1, "chunked on HTTP/1.0")
    }
    let fields = head.headers.fields.map { "\($0.name)=\($0.value)" }.joined(separator: "|")
    return "\(head.method) \(head.target) \(head.version) [\(fields)] keepAlive=\(head.keepAlive) "
        + "framing=\(head.framing) continue=\(head.expectsContinue) consumed=\(consumed)"
}

func checkFailure(_ failure: ParseFailure) {
    fuzzCheck([400, 408, 413, 414, 431, 505].contains(failure.status) && !failure.reason.isEmpty,
              "failure \(failure.status) \(failure.reason)")
}
