import DownloaderEngine

/// A request's path as the access log writes it: never a secret. A caller token is a path segment
/// in `DELETE /downloads/{token}` (a refused or failed cancel leaves it working), and an
/// absolute-form target (`GET http://user:pass@host/x`) may carry userinfo. Pure; the common path
/// costs two byte comparisons.
enum LoggedPath {
    static let tokenPlaceholder = "/downloads/{token}"

    static func shown(method: String, path: String) -> String {
        guard let first = path.utf8.first else { return path }
        if first != UInt8(ascii: "/") { return URLCredentials.redacted(path) }
        if method == "DELETE", path.hasPrefix("/downloads/"), !path.dropFirst("/downloads/".count).contains("/") {
            return tokenPlaceholder
        }
        return path
    }
}
