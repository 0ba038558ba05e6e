import Glibc

/// The API's resources, recognised from a request path. Pure, so the table test covers routing.
enum Endpoint: Equatable {
    case health
    /// `/readyz`: readiness (cluster mode: 503 while the database is unreachable).
    case ready
    case metrics
    /// `/downloads`
    case downloads
    /// `/downloads/{idOrToken}`: GET reads a download by id, DELETE withdraws a caller's token.
    case download(String)
    /// `/downloads/{id}/progress`
    case progress(String)
    /// `/downloads/{id}/file`
    case file(String)
    /// `/downloads/{id}/file-link`: a signed link to the file that needs no token (`FileLink`).
    case fileLink(String)
    /// `/fetch?url=…`: pull-through; also `/fetch/<name>?url=…`, the name ignored (for tools that
    /// take what a URL holds, or the name to save it under, from its path: pip, `curl -O`, wget).
    case fetch
    /// `/events`: every download's events (SSE).
    case events
    /// `/`: the operator page.
    case page

    init?(path: String) {
        // One pass over the bytes, no array of segments: this runs for every request.
        var path = path  // `withUTF8` needs a var; native strings are not copied
        guard let endpoint = path.withUTF8(Endpoint.recognise) else { return nil }
        self = endpoint
    }

    /// The endpoint of a path: `/`, or up to three non-empty segments (one trailing slash allowed).
    private static func recognise(_ path: UnsafeBufferPointer<UInt8>) -> Endpoint? {
        guard path.first == UInt8(ascii: "/") else { return nil }
        if path.count == 1 { return .page }
        var end = path.count
        if path[end - 1] == UInt8(ascii: "/") { end -= 1 }  // tolerate one trailing slash
        var bounds = (0..<0, 0..<0, 0..<0)
        var count = 0
        var start = 1
        while start <= end {
            var stop = start
            while stop < end, path[stop] != UInt8(ascii: "/") { stop += 1 }
            switch count {
            case 0: bounds.0 = start..<stop
            case 1: bounds.1 = start..<stop
            case 2: bounds.2 = start..<stop
            default: return nil
            }
            count += 1
            start = stop + 1
        }
        func range(_ index: Int) -> Range<Int> { index == 0 ? bounds.0 : index == 1 ? bounds.1 : bounds.2 }
        func segment(_ index: Int, is name: StaticString) -> Bool {
            let range = range(index)
            guard range.count == name.utf8CodeUnitCount else { return false }
            return memcmp(path.baseAddress! + range.lowerBound, name.utf8Start, range.count) == 0
        }
        func identifier(_ index: Int) -> String? {
            let bytes = UnsafeBufferPointer(rebasing: path[range(index)])
            return isIdentifier(bytes) ? String(decoding: bytes, as: UTF8.self) : nil
        }
        switch count {
        case 1 where segment(0, is: "healthz"): return .health
        case 1 where segment(0, is: "readyz"): return .ready
        case 1 where segment(0, is: "metrics"): return .metrics
        case 1 where segment(0, is: "downloads"): return .downloads
        case 1 where segment(0, is: "fetch"): return .fetch
        case 1 where segment(0, is: "events"): return .events
        case 2 where segment(0, is: "fetch") && !range(1).isEmpty: return .fetch
        case 2 where segment(0, is: "downloads"):
            return identifier(1).map { .download($0) }
        case 3 where segment(0, is: "downloads"):
            guard let id = identifier(1) else { return nil }
            if segment(2, is: "progress") { return .progress(id) }
            if segment(2, is: "file") { return .file(id) }
            if segment(2, is: "file-link") { return .fileLink(id) }
            return nil
        default: return nil
        }
    }

    /// Methods this endpoint answers, for `405` and `Allow`.
    var allowedMethods: [String] {
        switch self {
        case .health, .ready, .metrics, .progress: return ["GET", "HEAD"]
        case .downloads: return ["GET", "HEAD", "POST"]
        case .download: return ["GET", "HEAD", "DELETE"]
        case .file, .fileLink, .fetch, .events, .page: return ["GET", "HEAD"]
        }
    }

    /// Whether `method` is one of `allowedMethods` (asked for every request: no list is built).
    func allows(_ method: String) -> Bool {
        if method == "GET" || method == "HEAD" { return true }
        switch self {
        case .downloads: return method == "POST"
        case .download: return method == "DELETE"
        default: return false
        }
    }

    /// Ids and tokens are short runs of letters, digits, `-` and `_`; anything else is no resource.
    static func isIdentifier(_ s: String) -> Bool { isIdentifier(s.utf8[...]) }

    static func isIdentifier(_ s: some Collection<UInt8>) -> Bool {
        !s.isEmpty && s.count <= 128 && s.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
    }
}
