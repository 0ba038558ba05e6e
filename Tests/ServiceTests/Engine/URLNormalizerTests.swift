import Testing
@testable import DownloaderEngine

@Suite struct URLNormalizerTests {
    @Test(arguments: [
        ("http://Example.COM/a/b", "http://example.com/a/b"),
        ("HTTP://example.com", "http://example.com/"),
        ("https://example.com:443/x", "https://example.com/x"),
        ("http://example.com:80/x", "http://example.com/x"),
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("https://example.com:80/x", "https://example.com:80/x"),
        ("http://example.com/x#frag", "http://example.com/x"),
        ("http://example.com/x?b=1&a=2#f", "http://example.com/x?b=1&a=2"),
        ("http://127.0.0.1:9/f.bin", "http://127.0.0.1:9/f.bin"),
        ("http://[::1]:8080/f", "http://[::1]:8080/f"),
        ("http://example.com/Path/Case", "http://example.com/Path/Case"),
        ("http://example.com/a%20b", "http://example.com/a%20b"),
        // An IDN host stays in its ASCII (punycode) form: Foundation's parser, the path before
        // URLScanner, turned it into "b%c3%bccher.example", a host no resolver knows.
        ("http://xn--bcher-kva.example/x", "http://xn--bcher-kva.example/x"),
        // Dot segments are resolved (RFC 3986 §5.2.4) as libcurl sends the path: one resource, one key.
        ("http://example.com/a/./b/../c?x=/../y", "http://example.com/a/c?x=/../y"),
        ("http://example.com/a/.", "http://example.com/a/"), ("http://example.com/a/b/..", "http://example.com/a/"),
        ("http://example.com/../../a", "http://example.com/a"), ("http://example.com/.hidden/..x", "http://example.com/.hidden/..x"),
        ("http://example.com/a//b/../c", "http://example.com/a//c"), ("http://example.com/%2E%2E/a", "http://example.com/%2E%2E/a"),
    ])
    func normalises(_ input: String, _ expected: String) throws {
        #expect(try URLNormalizer.normalize(input).get() == expected)
        if input.contains("/.") {
            #expect(try URLNormalizer.normalizeWithFoundation(input).get() == expected, "the Foundation path agrees")
        }
    }

    @Test(arguments: [
        "", "example.com/x", "/relative/path", "ftp://example.com/x", "file:///etc/passwd",
        "http://user:pw@example.com/x", "http://user@example.com/x", "http:///x", "http://",
        "http://exa mple.com/", "javascript:alert(1)", "http://example.com:99999/",
        "http://example.com/\u{7f}", "http://exämple.com/",
    ])
    func rejects(_ input: String) {
        let result = URLNormalizer.normalize(input)
        guard case .failure(let error) = result else {
            Issue.record("accepted \(input): \(result)")
            return
        }
        #expect(error.code == (input.contains("@") ? EngineError.Code.urlCredentials : .invalidURL))
    }
}
