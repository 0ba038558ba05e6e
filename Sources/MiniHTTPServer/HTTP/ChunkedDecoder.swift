/// Pure, incremental decoder for `Transfer-Encoding: chunked` request bodies. It consumes only
/// complete lines, so the caller keeps unconsumed bytes buffered; every line and the total size
/// are bounded.
struct ChunkedDecoder {
    enum Result: Equatable {
        /// `consumed` bytes were used; feed the rest again together with more data.
        case needMoreData(consumed: Int)
        /// The body (and trailers) ended after `consumed` bytes.
        case done(consumed: Int)
        case invalid(ParseFailure)
    }

    private enum State {
        case sizeLine
        case data(remaining: Int)
        case dataEnd
        case trailer
        case done
    }

    let maxBodyBytes: Int
    let maxLineBytes: Int
    let maxTrailerBytes: Int
    private var state = State.sizeLine
    private(set) var decodedBytes = 0
    private var trailerBytes = 0

    init(maxBodyBytes: Int, maxLineBytes: Int = 4096, maxTrailerBytes: Int = 16 * 1024) {
        self.maxBodyBytes = maxBodyBytes
        self.maxLineBytes = maxLineBytes
        self.maxTrailerBytes = maxTrailerBytes
    }

    /// Decodes from `input`, appending chunk data to `body`.
    mutating func feed(_ input: UnsafeBufferPointer<UInt8>, into body: inout [UInt8]) -> Result {
        var p = 0
        let n = input.count
        func invalid(_ reason: String, _ status: Int = 400) -> Result {
            .invalid(ParseFailure(status: status, reason: reason))
        }
        while true {
            switch state {
            case .done:
                return .done(consumed: p)
            case .data(let remaining):
                let take = min(remaining, n - p)
                if take > 0 {
                    body.append(contentsOf: UnsafeBufferPointer(rebasing: input[p..<(p + take)]))
                    p += take
                }
                if take < remaining {
                    state = .data(remaining: remaining - take)
                    return .needMoreData(consumed: p)
                }
                state = .dataEnd
            case .dataEnd:
                guard n - p >= 2 else { return .needMoreData(consumed: p) }
                guard input[p] == 13, input[p + 1] == 10 else { return invalid("chunk data not followed by CRLF") }
                p += 2
                state = .sizeLine
            case .sizeLine, .trailer:
                var e = p
                while e < n, input[e] != 10 { e += 1 }
                if e == n {
                    // The line may end in a CR still waiting for its LF: that byte is not counted.
                    if n - p > maxLineBytes + 1 { return invalid("chunk line too long") }
                    return .needMoreData(consumed: p)
                }
                guard e > p, input[e - 1] == 13 else { return invalid("chunk line must end with CRLF") }
                let line = UnsafeBufferPointer(rebasing: input[p..<(e - 1)])
                if line.count > maxLineBytes { return invalid("chunk line too long") }
                p = e + 1
                if case .trailer = state {
                    if line.isEmpty { state = .done; continue }
                    trailerBytes += line.count + 2
                    if trailerBytes > maxTrailerBytes { return invalid("trailer section too large", 431) }
                    guard let colon = line.firstIndex(of: 58), colon > 0,
                          line[..<colon].allSatisfy(RequestParser.isTokenByte),
                          line[(colon + 1)...].allSatisfy({ ($0 >= 32 && $0 != 127) || $0 == 9 })
                    else { return invalid("malformed trailer field") }
                    continue
                }
                switch Self.parseSize(line) {
                case nil:
                    return invalid("malformed chunk size")
                case 0?:
                    state = .trailer
                case let size?:
                    if size > maxBodyBytes - decodedBytes { return invalid("request body too large", 413) }
                    decodedBytes += size
                    state = .data(remaining: size)
                }
            }
        }
    }

    /// `1*HEXDIG [ BWS ";" ext ]`; nil when malformed.
    static func parseSize(_ line: UnsafeBufferPointer<UInt8>) -> Int? {
        var size = 0
        var i = 0
        while i < line.count {
            let c = line[i]
            let digit: Int
            switch c {
            case 48...57: digit = Int(c - 48)
            case 65...70: digit = Int(c - 55)
            case 97...102: digit = Int(c - 87)
            default: digit = -1
            }
            if digit < 0 { break }
            if i >= 15 { return nil }
            size = size * 16 + digit
            i += 1
        }
        guard i > 0 else { return nil }
        var j = i
        while j < line.count, line[j] == 32 || line[j] == 9 { j += 1 }
        if j == line.count { return j == i ? size : nil }
        guard line[j] == 59 else { return nil }
        // Extensions: visible characters, spaces, tabs, bounded by the line limit.
        for k in (j + 1)..<line.count where (line[k] < 32 && line[k] != 9) || line[k] == 127 { return nil }
        return size
    }
}
