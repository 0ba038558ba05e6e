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
    /// `/fetch?url=…`: pull-through.
    case fetch
    /// `/events`: every download's events (SSE).
    case events
    /// `/`: the operator page.
    case page

    init?(path: String) {
        guard path.utf8.first == UInt8(ascii: "/") else { return nil }
        if path.utf8.count == 1 {
            self = .page
            return
        }
        // Substrings, not Strings: this runs for every request.
        var segments = path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), maxSplits: 4, omittingEmptySubsequences: false)
        if segments.count > 1, segments.last?.isEmpty == true { segments.removeLast() }  // tolerate one trailing slash
        func segment(_ index: Int, is name: String) -> Bool { segments[index].elementsEqual(name.utf8) }
        func identifier(_ index: Int) -> String? {
            Endpoint.isIdentifier(segments[index]) ? String(Substring(segments[index])) : nil
        }
        switch segments.count {
        case 1 where segment(0, is: "healthz"): self = .health
        case 1 where segment(0, is: "readyz"): self = .ready
        case 1 where segment(0, is: "metrics"): self = .metrics
        case 1 where segment(0, is: "downloads"): self = .downloads
        case 1 where segment(0, is: "fetch"): self = .fetch
        case 1 where segment(0, is: "events"): self = .events
        case 2 where segment(0, is: "downloads"):
            guard let id = identifier(1) else { return nil }
            self = .download(id)
        case 3 where segment(0, is: "downloads"):
            guard let id = identifier(1) else { return nil }
            if segment(2, is: "progress") {
                self = .progress(id)
            } else if segment(2, is: "file") {
                self = .file(id)
            } else {
                return nil
            }
        default: return nil
        }
    }

    /// Methods this endpoint answers, for `405` and `Allow`.
    var allowedMethods: [String] {
        switch self {
        case .health, .ready, .metrics, .progress: return ["GET", "HEAD"]
        case .downloads: return ["GET", "HEAD", "POST"]
        case .download: return ["GET", "HEAD", "DELETE"]
        case .file, .fetch, .events, .page: return ["GET", "HEAD"]
        }
    }

    /// Ids and tokens are short runs of letters, digits, `-` and `_`; anything else is no resource.
    static func isIdentifier(_ s: String) -> Bool { isIdentifier(s.utf8[...]) }

    static func isIdentifier(_ s: Substring.UTF8View) -> Bool {
        !s.isEmpty && s.count <= 128 && s.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
    }
}
