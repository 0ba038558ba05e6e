import Glibc

/// The parts of a URL that `URLGrammar` accepts, found in one pass over its bytes; nil for any
/// URL the grammar rejects. `URLNormalizer`'s fast path: Foundation's `URLComponents` and the
/// grammar's regular expression cost each `POST /downloads` and `/fetch` ~20 µs, and the
/// requests that coalesce on one URL arrive together. Pure; `URLScannerTests` compares it with
/// the Foundation path on a generated corpus.
struct URLScanner: Equatable {
    /// `http` or `https`, lower-cased.
    var scheme: String
    /// User info as written (percent-encoded), when the URL has `…@` and credentials are allowed.
    var user: String?
    var password: String?
    /// As written; an IPv6 literal without its brackets.
    var host: String
    var isIPv6: Bool
    var port: Int?
    /// As written, possibly empty.
    var path: String
    /// After `?`, as written (the fragment is dropped).
    var query: String?

    /// The coalescing form: scheme and host lower-cased, the default port dropped, an empty path `/`,
    /// dot segments resolved.
    var normalized: String {
        var out = scheme + "://"
        if user != nil || password != nil {
            out += user ?? ""
            if let password { out += ":" + password }
            out += "@"
        }
        out += isIPv6 ? "[" + host.lowercased() + "]" : host.lowercased()
        if let port, port != (scheme == "http" ? 80 : 443) { out += ":\(port)" }
        out += Self.withoutDotSegments(path.isEmpty ? "/" : path)
        if let query { out += "?" + query }
        return out
    }

    /// `path` with its `.` and `..` segments resolved (RFC 3986 §5.2.4), as libcurl sends it:
    /// `/a/./b/../c` is the resource `/a/c`, one download. Literal dots only (`%2E` is another name).
    static func withoutDotSegments(_ path: String) -> String {
        guard path.contains("/.") else { return path }
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()  // path starts with "/"
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".": if last { output.append("") }
            case "..":
                _ = output.popLast()
                if last { output.append("") }
            default: output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }

    static func scan(_ url: String, allowingCredentials: Bool) -> URLScanner? {
        let b = Array(url.utf8)
        var i = 0
        func at(_ k: Int) -> UInt8 { k < b.count ? b[k] : 0 }
        func text(_ r: Range<Int>) -> String { String(decoding: b[r], as: UTF8.self) }
        /// The end of the run from `k` of bytes `accepted` allows (and `%XX` when `encoded`).
        func run(from k: Int, encoded: Bool, _ accepted: (UInt8) -> Bool) -> Int {
            var k = k
            while k < b.count {
                if accepted(b[k]) {
                    k += 1
                } else if encoded, b[k] == UInt8(ascii: "%"), isHex(at(k + 1)), isHex(at(k + 2)) {
                    k += 3
                } else {
                    break
                }
            }
            return k
        }
        // Scheme.
        guard b.count >= 7, lower(b[0]) == UInt8(ascii: "h"), lower(b[1]) == UInt8(ascii: "t"),
              lower(b[2]) == UInt8(ascii: "t"), lower(b[3]) == UInt8(ascii: "p") else { return nil }
        i = 4
        let secure = lower(at(i)) == UInt8(ascii: "s")
        if secure { i += 1 }
        guard at(i) == UInt8(ascii: ":"), at(i + 1) == UInt8(ascii: "/"), at(i + 2) == UInt8(ascii: "/") else { return nil }
        i += 3
        // User info.
        var user: String?
        var password: String?
        if allowingCredentials {
            let end = run(from: i, encoded: true) { isUserInfo($0) }
            if at(end) == UInt8(ascii: "@") {
                let info = b[i..<end]
                if let colon = info.firstIndex(of: UInt8(ascii: ":")) {
                    user = text(i..<colon)
                    password = text((colon + 1)..<end)
                } else {
                    user = text(i..<end)
                }
                i = end + 1
            }
        }
        // Host.
        let host: String
        let isIPv6 = at(i) == UInt8(ascii: "[")
        if isIPv6 {
            let end = run(from: i + 1, encoded: false) { isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
            guard at(end) == UInt8(ascii: "]"), (2...45).contains(end - i - 1) else { return nil }
            host = text((i + 1)..<end)
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else { return nil }
            i = end + 1
        } else {
            let end = run(from: i, encoded: false) { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
            guard isHostName(b[i..<end]) else { return nil }
            host = text(i..<end)
            i = end
        }
        // Port: 1-65535, no leading zero.
        var port: Int?
        if at(i) == UInt8(ascii: ":") {
            let end = run(from: i + 1, encoded: false) { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            let digits = b[(i + 1)..<end]
            guard (1...5).contains(digits.count), digits.first != UInt8(ascii: "0") else { return nil }
            let value = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard value <= 65535 else { return nil }
            port = value
            i = end
        }
        // Path, query, fragment.
        let pathEnd = run(from: i, encoded: true) { isPathCharacter($0) || $0 == UInt8(ascii: "/") }
        guard pathEnd == i || b[i] == UInt8(ascii: "/") else { return nil }
        let path = text(i..<pathEnd)
        i = pathEnd
        var query: String?
        if at(i) == UInt8(ascii: "?") {
            let end = run(from: i + 1, encoded: true) { isPathCharacter($0) || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }
            query = text((i + 1)..<end)
            i = end
        }
        if i < b.count, b[i] == UInt8(ascii: "#") {
            i = run(from: i + 1, encoded: true) { isPathCharacter($0) || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }
        }
        guard i == b.count else { return nil }
        return URLScanner(scheme: secure ? "https" : "http", user: user, password: password, host: host, isIPv6: isIPv6,
                          port: port, path: path, query: query)
    }

    /// Dot-separated labels of 1-63 letters, digits and hyphens, none starting or ending with a hyphen.
    private static func isHostName(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard !bytes.isEmpty else { return false }
        for label in bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard (1...63).contains(label.count), let first = label.first, let last = label.last,
                  isAlphanumeric(first), isAlphanumeric(last) else { return false }
        }
        return true
    }

    private static func lower(_ c: UInt8) -> UInt8 { c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c + 32 : c }

    private static func isAlphanumeric(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))
            || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "F"))
    }

    /// `URLGrammar.character` without `%XX`: unreserved, sub-delims, `:` and `@`.
    private static func isPathCharacter(_ c: UInt8) -> Bool {
        isAlphanumeric(c) || "._~!$&'()*+,;=:@-".utf8.contains(c)
    }

    /// `URLGrammar.userInfo`'s characters without `%XX`: as the path's, but no `@`.
    private static func isUserInfo(_ c: UInt8) -> Bool {
        isAlphanumeric(c) || "._~!$&'()*+,;=:-".utf8.contains(c)
    }
}
