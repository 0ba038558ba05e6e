import Foundation
import MiniHTTPServer

/// A browser lets any web page send a "simple" cross-site request (a form's POST, a `text/plain`
/// body, an `<img>`: no CORS preflight) and adds the Basic credentials it cached for this service.
/// Without a token (the default on loopback) that is every page the user visits. So a request that
/// changes something is refused when the browser marks it as coming from another origin: every
/// method but GET, HEAD and OPTIONS, and `GET`/`HEAD /fetch` (it starts a download) unless it is
/// the user following a link: a navigation (`Sec-Fetch-Mode: navigate`) of a window, not of a
/// frame (a hidden `<iframe>` would fetch unseen). A page's own navigation of its window
/// (`location`, `window.open`) passes as a click would: Safari sends no `Sec-Fetch-User` to tell
/// them apart, and it shows (the browser's download starts in front of the user). From another origin means
/// `Sec-Fetch-Site` other than `same-origin` or `none` (typed by the user), or, from browsers that
/// do not send that (plain-HTTP pages), an `Origin` whose host and port are neither the request's
/// `Host` nor its `X-Forwarded-Host` (a reverse proxy's; a browser cannot add that field without
/// a preflight this service never answers). Clients that are not browsers send none of these
/// fields and are not affected; the operator page's own requests are same-origin. Pure.
enum CrossSiteGuard {
    static func refusal(method: String, path: String, headers: HTTPHeaders) -> APIError? {
        let reading = method == "GET" || method == "HEAD" || method == "OPTIONS"
        if reading && !(method != "OPTIONS" && Endpoint(path: path) == .fetch) { return nil }
        if let site = headers["sec-fetch-site"] {
            let lowered = site.lowercased()
            if lowered == "same-origin" || lowered == "none" { return nil }
            if reading && isUserNavigation(headers) { return nil }
            return refused("Sec-Fetch-Site: \(site)")
        }
        guard let origin = headers["origin"] else { return nil }
        guard let authority = authority(ofOrigin: origin) else { return refused("Origin: \(origin)") }
        let hosts = [headers["host"], headers["x-forwarded-host"]?.split(separator: ",").first.map(String.init)]
        let matches = hosts.contains { host in
            host.map { authority.text == normalized(host: $0.trimmingCharacters(in: .whitespaces), defaultPort: authority.defaultPort) } ?? false
        }
        return matches ? nil : refused("Origin: \(origin)")
    }

    /// A navigation of a window (following a link), not of a frame.
    static func isUserNavigation(_ headers: HTTPHeaders) -> Bool {
        let nested: Set<String> = ["iframe", "frame", "embed", "object", "fencedframe"]
        return headers["sec-fetch-mode"]?.lowercased() == "navigate" && !nested.contains(headers["sec-fetch-dest"]?.lowercased() ?? "")
    }

    private static func refused(_ what: String) -> APIError {
        APIError(status: 403, .crossSite,
                 "a browser sent this request from another site (\(what)); only the service's own page may change things from a browser")
    }

    /// `scheme://host[:port]` → host and port (lower-cased; the scheme's default port as none).
    /// nil for `null` and anything else that is not such an origin.
    static func authority(ofOrigin origin: String) -> (text: String, defaultPort: String)? {
        let lowered = origin.lowercased()
        let scheme: String
        if lowered.hasPrefix("http://") { scheme = "http" } else if lowered.hasPrefix("https://") { scheme = "https" } else { return nil }
        let rest = lowered.dropFirst(scheme.count + 3)
        guard !rest.isEmpty, !rest.contains("/") else { return nil }
        let defaultPort = scheme == "http" ? "80" : "443"
        return (normalized(host: String(rest), defaultPort: defaultPort), defaultPort)
    }

    /// `host[:port]` lower-cased, without the default port.
    static func normalized(host: String, defaultPort: String) -> String {
        let lowered = host.lowercased()
        return lowered.hasSuffix(":" + defaultPort) ? String(lowered.dropLast(defaultPort.count + 1)) : lowered
    }
}
