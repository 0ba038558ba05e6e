import Basics
import DownloaderEngine

/// The query of `GET /fetch?url=…` (optional `storage`, `sha256`, `size`, `connections`). Pure.
///
/// `url` is percent-decoded once (`+` stays `+`), so an unencoded URL is taken as it is when it
/// holds no `&`, `#` or `%`. Unknown parameters are ignored; any parameter given twice is refused.
struct FetchQuery: Equatable {
    var request: DownloadRequest

    static func parse(_ query: String?) -> Result<FetchQuery, APIError> {
        var values: [String: String] = [:]
        for part in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(pair[0])
            guard values[name] == nil else {
                return .failure(.badRequest(.invalidQuery, "the query parameter \(name) is given more than once"))
            }
            values[name] = pair.count > 1 ? String(pair[1]) : ""
        }
        guard let raw = values["url"], !raw.isEmpty else {
            return .failure(.badRequest(.missingURL, "give the URL to fetch as ?url=<percent-encoded URL>"))
        }
        guard let url = percentDecoded(raw) else {
            return .failure(.badRequest(.invalidQuery, "url is not valid percent-encoding"))
        }
        var storage = StorageClass.cache
        if let text = values["storage"].flatMap(percentDecoded) ?? values["storage"] {
            guard let parsed = StorageClass(rawValue: text) else {
                return .failure(.badRequest(.invalidStorage, "storage must be cache or persistent"))
            }
            storage = parsed
        }
        var size: Int64?
        if let text = values["size"] {
            guard let parsed = Int64(text), (0...CreateDownloadBody.maxSize).contains(parsed) else {
                return .failure(.badRequest(.invalidSize, "size must be an integer from 0 to 2^53-1"))
            }
            size = parsed
        }
        var connections: Int?
        if let text = values["connections"] {
            let ceiling = CommandLineOptions.connectionsCeiling
            guard let parsed = Int(text), (1...ceiling).contains(parsed) else {
                return .failure(.badRequest(.invalidConnections, "connections must be an integer from 1 to \(ceiling)"))
            }
            connections = parsed
        }
        var sha: String?
        if let text = values["sha256"] {
            // A bad escape is refused: dropped, it would fetch without the check the caller asked for.
            guard let decoded = percentDecoded(text) else {
                return .failure(.badRequest(.invalidQuery, "sha256 is not valid percent-encoding"))
            }
            sha = decoded
        }
        return .success(FetchQuery(request: DownloadRequest(url: url, storage: storage, sha256: sha, size: size,
                                                            connections: connections)))
    }

    /// `%XX` decoded once; nil for a malformed escape or bytes that are not UTF-8. `+` is kept.
    static func percentDecoded(_ text: String) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        return HexDigit.percentDecoded(text).flatMap { String(validating: $0, as: UTF8.self) }
    }
}
