import Testing
@testable import DownloaderEngine

/// `URLNormalizer`'s fast path (`URLScanner`) against its Foundation path (`URLComponents` and the
/// grammar's regular expression): the same answer, accepted or refused with the same error, for
/// every URL of a generated corpus, with and without credentials allowed.
@Suite struct URLScannerTests {
    /// Each part of a URL: forms the grammar accepts, then forms it does not (picked one time in eight).
    typealias Part = (valid: [String], invalid: [String])
    static let schemes: Part = (["http", "https", "HTTP", "hTtPs", "httpS"], ["ftp", "htt", "", "httpss", "http:"])
    static let separators: Part = (["://"], [":/", "//", ":///", ""])
    static let userInfos: Part = (["", "", "u@", "u:p@", ":p@", "@", "u:@", "u%41:p@", "u!$&'()*+,;=-._~@", "u:p:q@"],
                                  ["u%4:p@", "a@b@", "u/@", "[u]@", "u p@"])
    static let hosts: Part = (["a", "Example.COM", "a-b.c", "1.2.3.4", "127.1", "0x7f.1", "[::1]", "[::FFFF:1.2.3.4]", "[2001:DB8::1]",
                               String(repeating: "x", count: 63), "A.B.C.D.E", "a1-2b.c3"],
                              ["-a", "a-", "a..b", "a.", ".a", "[1.2.3.4]", "[:::::]", "[::1", "::1]", "[]", "[::1]x",
                               String(repeating: "x", count: 64), "a_b", "", "a%41", "a:b"])
    static let ports: Part = (["", "", ":1", ":80", ":443", ":65535", ":8080"], [":", ":0", ":080", ":65536", ":99999", ":1a", "::80", ":123456"])
    static let paths: Part = (["", "/", "/a/b", "/a%20b", "/a:b@c", "/;x=1", "/(x)*", "//x", "/~u/_.-", "/A%2fB", "/!$&'()*+,;="],
                              ["/%zz", "/%4", "/a\\b", "/\"", "/{x}", "/<x>", "/a[b]", "x"])
    static let queries: Part = (["", "", "?", "?a=1&b=2", "?/?", "?%41", "??"], ["?%4", "?[x]", "?a b"])
    static let fragments: Part = (["", "", "#", "#f", "#/?", "#%41"], ["#a#b", "#%zz", "#[x]"])

    /// SplitMix64: the corpus is the same on every run.
    struct Seeded {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
        mutating func pick(_ part: Part) -> String {
            let options = next(8) == 0 ? part.invalid : part.valid
            return options[next(options.count)]
        }
    }

    static func corpus(count: Int) -> [String] {
        var random = Seeded(state: 12)
        let alphabet = Array("aZ09-._~%:/?#[]@!$&'()*+,;= \"<>\\{}|^`")
        var urls: [String] = []
        for n in 0..<count {
            var url = random.pick(schemes) + random.pick(separators) + random.pick(userInfos) + random.pick(hosts)
                + random.pick(ports) + random.pick(paths) + random.pick(queries) + random.pick(fragments)
            if n % 3 == 0, !url.isEmpty {  // one character inserted, replaced or removed somewhere
                var chars = Array(url)
                let at = random.next(chars.count)
                switch random.next(3) {
                case 0: chars.insert(alphabet[random.next(alphabet.count)], at: at)
                case 1: chars[at] = alphabet[random.next(alphabet.count)]
                default: chars.remove(at: at)
                }
                url = String(chars)
            }
            urls.append(url)
        }
        return urls
    }

    @Test(arguments: [false, true])
    func agreesWithFoundationOnTheCorpus(credentials: Bool) {
        var accepted = 0
        var differences: [String] = []
        for url in Self.corpus(count: 20_000) {
            let fast = URLNormalizer.normalize(url, allowCredentials: credentials)
            let reference = URLNormalizer.normalizeWithFoundation(url, allowCredentials: credentials)
            if fast != reference, differences.count < 10 { differences.append("\(url): \(fast) against \(reference)") }
            if case .success = reference { accepted += 1 }
        }
        #expect(differences.isEmpty, "\(differences)")
        #expect(accepted > 1_000, "the corpus must hold enough valid URLs to compare (\(accepted))")
    }

    @Test func splitsUserInfoAtItsFirstColon() throws {
        let parts = try #require(URLScanner.scan("HTTPS://u:p:q@[::AB]:8443/x?y#z", allowingCredentials: true))
        #expect(parts == URLScanner(scheme: "https", user: "u", password: "p:q", host: "::AB", isIPv6: true, port: 8443,
                                    path: "/x", query: "y"))
        #expect(parts.normalized == "https://u:p:q@[::ab]:8443/x?y")
        #expect(URLScanner.scan("http://u:p@a/", allowingCredentials: false) == nil)
    }
}
