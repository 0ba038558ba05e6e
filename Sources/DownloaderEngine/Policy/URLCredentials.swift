import Basics
import Foundation

/// `user:password@` in a URL (accepted only with `allowURLCredentials`) is a credential like any
/// caller header: it leaves the URL and becomes the caller's `Authorization: Basic` header, so the
/// download is private to the callers that give it, coalesced under its keyed hash, sent only to
/// the URL's own origin, and the password is never stored, logged or shown. Pure.
public enum URLCredentials {
    /// `url` (normalised) without its userinfo, and the `Authorization` value the userinfo makes
    /// (percent-decoded to bytes, as curl sends them, UTF-8 or not; nil when the URL carries none).
    static func split(_ url: String) -> (url: String, authorization: String?) {
        guard let (start, at) = userinfo(in: url) else { return (url, nil) }
        let userinfo = url[start..<at]
        let colon = userinfo.firstIndex(of: ":")
        let user = decoded(userinfo[..<(colon ?? userinfo.endIndex)])
        let password = colon.map { decoded(userinfo[userinfo.index(after: $0)...]) } ?? []
        let bare = String(url[..<start]) + String(url[url.index(after: at)...])
        return (bare, "Basic " + Data(user + [UInt8(ascii: ":")] + password).base64EncodedString())
    }

    /// `url` as shown to anyone: `https://user:secret@host/x` becomes `https://***@host/x`. A URL
    /// without `@` costs one scan (it runs for every snapshot answered).
    public static func redacted(_ url: String) -> String {
        guard let (start, at) = userinfo(in: url) else { return url }
        return String(url[..<start]) + "***" + String(url[at...])
    }

    /// Where the userinfo lies: from the authority's start to its last `@` (nil: none).
    static func userinfo(in url: String) -> (start: String.Index, at: String.Index)? {
        guard url.utf8.contains(UInt8(ascii: "@")), let schemeEnd = url.firstRange(of: "://") else { return nil }
        let start = schemeEnd.upperBound
        let end = url[start...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
        return url[start..<end].lastIndex(of: "@").map { (start, $0) }
    }

    private static func decoded(_ part: Substring) -> [UInt8] {
        HexDigit.percentDecoded(part) ?? Array(part.utf8)
    }
}
