import DownloaderEngine

/// A request's path as the access log writes it: never a secret. A caller token is a path segment
/// in `DELETE /downloads/{token}` (a refused or failed cancel leaves it working), and an
/// absolute-form target (`GET http://user:pass@host/x`) may carry userinfo. Pure; the common path
/// costs two byte comparisons.
enum LoggedPath {
    static let tokenPlaceholder = "/downloads/{token}"

    static func shown(method: String, path: String) -> String {
        guard let first = path.utf8.first else { return path }
        let absolute = first != UInt8(ascii: "/")
        // Any DELETE under /downloads/: the router takes `/downloads/{token}/` too, and a path it
        // refuses may still hold a live token.
        if method == "DELETE", (absolute ? originForm(path) : path[...]).hasPrefix("/downloads/") { return tokenPlaceholder }
        return absolute ? URLCredentials.redacted(path) : path
    }

    /// The path of an absolute-form target (`http://host/x` → `/x`).
    private static func originForm(_ target: String) -> Substring {
        guard let scheme = target.range(of: "://") else { return target[...] }
        let rest = target[scheme.upperBound...]
        return rest.firstIndex(of: "/").map { rest[$0...] } ?? ""
    }
}
