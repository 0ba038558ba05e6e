import MiniHTTPServer
import Testing
@testable import DownloadService

/// Which requests a browser sent from another site are refused: only those that change something.
@Suite struct CrossSiteGuardTests {
    static func headers(_ fields: [(String, String)]) -> HTTPHeaders {
        var h = HTTPHeaders()
        for (name, value) in fields { h.add(name, value) }
        return h
    }

    @Test(arguments: [
        // Not a browser: neither field.
        ("POST", [("Host", "127.0.0.1:8080")], false),
        // Sec-Fetch-Site decides when a browser sends it.
        ("POST", [("Host", "h:8080"), ("Sec-Fetch-Site", "same-origin"), ("Origin", "http://other")], false),
        ("POST", [("Host", "h:8080"), ("Sec-Fetch-Site", "none")], false),
        ("POST", [("Host", "h:8080"), ("Sec-Fetch-Site", "cross-site")], true),
        ("DELETE", [("Host", "h:8080"), ("Sec-Fetch-Site", "Same-Site")], true),
        ("GET", [("Host", "h:8080"), ("Sec-Fetch-Site", "cross-site")], false),
        ("HEAD", [("Host", "h:8080"), ("Origin", "http://evil.example")], false),
        // Else the Origin must be this Host.
        ("POST", [("Host", "127.0.0.1:8080"), ("Origin", "http://127.0.0.1:8080")], false),
        ("POST", [("Host", "Service.Example"), ("Origin", "https://service.example:443")], false),
        ("POST", [("Host", "service.example:80"), ("Origin", "http://service.example")], false),
        ("POST", [("Host", "127.0.0.1:8080"), ("Origin", "http://127.0.0.1:3000")], true),
        ("POST", [("Host", "127.0.0.1:8080"), ("Origin", "https://evil.example")], true),
        ("POST", [("Host", "127.0.0.1:8080"), ("Origin", "null")], true),
        ("POST", [("Origin", "http://127.0.0.1:8080")], true),
        ("POST", [("Host", "h"), ("Origin", "http://h/path")], true),
        // Behind a reverse proxy that rewrites Host: its X-Forwarded-Host names the page's origin.
        ("POST", [("Host", "127.0.0.1:8080"), ("X-Forwarded-Host", "nas.lan"), ("Origin", "http://nas.lan")], false),
        ("POST", [("Host", "127.0.0.1:8080"), ("X-Forwarded-Host", "nas.lan, other"), ("Origin", "http://evil.example")], true),
    ] as [(String, [(String, String)], Bool)])
    func refusals(method: String, fields: [(String, String)], refused: Bool) {
        let refusal = CrossSiteGuard.refusal(method: method, path: "/downloads", headers: Self.headers(fields))
        #expect((refusal != nil) == refused)
        #expect(refusal.map { $0.status == 403 && $0.code == "cross_site" } ?? true)
    }

    /// `/fetch` starts a download on a GET: another site's page may not make a browser do that
    /// unseen (an `<img>`, a script's fetch, a hidden frame), but a user may follow a link to it
    /// (Safari sends no `Sec-Fetch-User`).
    @Test(arguments: [
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors")], true),
        ("HEAD", [("Sec-Fetch-Site", "same-site"), ("Sec-Fetch-Mode", "cors")], true),
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1"),
                 ("Sec-Fetch-Dest", "document")], false),
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1")], false),
        // Safari's click on a link: no Sec-Fetch-User.
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Dest", "document")], false),
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate")], false),
        // A hidden frame, even after a click on the page.
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1"),
                 ("Sec-Fetch-Dest", "iframe")], true),
        ("GET", [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Dest", "embed")], true),
        ("GET", [("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "cors")], false),
        ("GET", [("Host", "h:8080"), ("Origin", "http://evil.example")], true),
        ("GET", [("Host", "h:8080")], false),
        ("OPTIONS", [("Sec-Fetch-Site", "cross-site")], false),
    ] as [(String, [(String, String)], Bool)])
    func fetchRefusals(method: String, fields: [(String, String)], refused: Bool) {
        for path in ["/fetch", "/fetch/pkg-1.0-py3-none-any.whl", "/fetch/"] {
            #expect((CrossSiteGuard.refusal(method: method, path: path, headers: Self.headers(fields)) != nil) == refused, "\(path)")
        }
        #expect(CrossSiteGuard.refusal(method: method, path: "/downloads/x/file", headers: Self.headers(fields)) == nil)
    }
}
