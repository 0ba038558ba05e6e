/// The API's resources, recognised from a request path. Pure, so the table test covers routing.
enum Endpoint: Equatable {
    case health
    case metrics
    /// `/downloads`
    case downloads
    /// `/downloads/{idOrToken}`: GET reads a download by id, DELETE withdraws a caller's token.
    case download(String)
    /// `/downloads/{id}/progress`
    case progress(String)
    /// `/downloads/{id}/file`
    case file(String)

    init?(path: String) {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard path.hasPrefix("/") else { return nil }
        if segments.count > 1, segments.last == "" { segments.removeLast() }  // tolerate one trailing slash
        switch segments.count {
        case 1 where segments[0] == "healthz": self = .health
        case 1 where segments[0] == "metrics": self = .metrics
        case 1 where segments[0] == "downloads": self = .downloads
        case 2 where segments[0] == "downloads" && Endpoint.isIdentifier(segments[1]):
            self = .download(segments[1])
        case 3 where segments[0] == "downloads" && Endpoint.isIdentifier(segments[1]):
            switch segments[2] {
            case "progress": self = .progress(segments[1])
            case "file": self = .file(segments[1])
            default: return nil
            }
        default: return nil
        }
    }

    /// Methods this endpoint answers, for `405` and `Allow`.
    var allowedMethods: [String] {
        switch self {
        case .health, .metrics, .progress: return ["GET", "HEAD"]
        case .downloads: return ["GET", "HEAD", "POST"]
        case .download: return ["GET", "HEAD", "DELETE"]
        case .file: return ["GET", "HEAD"]
        }
    }

    /// Ids and tokens are short runs of letters, digits, `-` and `_`; anything else is no resource.
    static func isIdentifier(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 128 && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
    }
}
