import DownloaderEngine

/// A request's path as the access log writes it: never a secret. A caller token is a path segment
/// in `DELETE /downloads/{token}` (a refused or failed cancel leaves it working), also when a
/// client follows the `cancel` link with another method (`GET /downloads/{token}` is a 404, the
/// token still works), and an absolute-form target (`GET http://user:pass@host/x`) may carry
/// userinfo. Pure; the common path costs a few byte comparisons.
enum LoggedPath {
    static let tokenPlaceholder = "/downloads/{token}"

    static func shown(method: String, path: String) -> String {
        guard let first = path.utf8.first else { return path }
        let absolute = first != UInt8(ascii: "/")
        let target = absolute ? originForm(path) : path[...]
        if target.hasPrefix("/downloads/") {
            // Any DELETE under /downloads/: the router takes `/downloads/{token}/` too, and a path it
            // refuses may still hold a live token. Any other method: a segment shaped as a token.
            if method == "DELETE" || isCallerToken(target.dropFirst("/downloads/".count).prefix { $0 != "/" }) { return tokenPlaceholder }
        }
        return absolute ? URLCredentials.redacted(path) : path
    }

    /// A caller token's shape: 32 lower-case hex digits (a download id has 16).
    static func isCallerToken(_ segment: Substring) -> Bool {
        segment.utf8.count == 32 && segment.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// The path of an absolute-form target (`http://host/x` → `/x`).
    private static func originForm(_ target: String) -> Substring {
        guard let scheme = target.range(of: "://") else { return target[...] }
        let rest = target[scheme.upperBound...]
        return rest.firstIndex(of: "/").map { rest[$0...] } ?? ""
    }
}
