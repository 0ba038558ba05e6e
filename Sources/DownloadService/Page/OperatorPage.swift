import DownloaderEngine
import MiniHTTPServer

/// `GET /`: the operator page, one self-contained document (markup, style and script in
/// `OperatorPage+*.swift`; no other resource is loaded, so it works offline). Its inline style and
/// script are allowed by their SHA-256 hashes in a strict Content-Security-Policy; nothing else
/// may run or load, and the page talks only to this origin. Never needs a token: the page asks for
/// one (kept in the tab's sessionStorage) when the API answers 401.
enum OperatorPage {
    static let contentSecurityPolicy: String = [
        "default-src 'none'",
        "script-src 'sha256-\(SHA256Digest.base64(of: Array(script.utf8)))'",
        "style-src 'sha256-\(SHA256Digest.base64(of: Array(style.utf8)))'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ].joined(separator: "; ")

    static let body: [UInt8] = Array(markup(style: style, script: script).utf8)

    static var response: Response {
        Response(headers: [
            "Content-Type": "text/html; charset=utf-8",
            "Content-Security-Policy": contentSecurityPolicy,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "Cache-Control": "no-cache",
        ], body: .bytes(body))
    }
}
