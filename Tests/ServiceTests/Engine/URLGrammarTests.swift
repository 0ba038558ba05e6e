import Foundation
import Testing
@testable import DownloaderEngine

@Suite struct URLGrammarTests {
    @Test(arguments: [
        "http://a/", "HTTPS://Example.COM:8080/x?y=1&z=%20#frag", "http://1.2.3.4/x", "http://a", "http://a:65535/",
        "http://xn--bcher-kva.example/p;v=1/(x)*", "http://[::1]:8080/f", "http://[2001:db8::1]/", "http://[::ffff:1.2.3.4]/",
        "http://a/?q=/a?b", "http://a.b-c.d/~u/_x.tar.gz",
    ])
    func accepts(_ url: String) {
        #expect(URLGrammar.accepts(url))
    }

    @Test(arguments: [
        "", "a/b", "ftp://a/", "http://", "http:///x", "http://a@b/", "http://u:p@b/", "http://a:0/", "http://a:65536/",
        "http://a:/", "http://-a/", "http://a-/", "http://a..b/", "http://a/%zz", "http://a/b c", "http://a/\u{7f}",
        "http://exämple.com/", "http://a/ü", "http://[::1/", "http://[:::::]/", "http://[1.2.3.4]/", "http://a/\"", "http://a/<x>",
        "http://a/{x}", "http://a/x\\y", "http://a/#a#b", "javascript://a/%0aalert(1)x\n",
    ])
    func rejects(_ url: String) {
        #expect(!URLGrammar.accepts(url))
    }

    /// The OpenAPI document states the same pattern, so schemathesis and the engine agree.
    @Test func openAPIStatesTheSamePattern() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let spec = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let yamlQuoted = "pattern: '" + URLGrammar.pattern.replacingOccurrences(of: "'", with: "''") + "'"
        #expect(spec.contains(yamlQuoted))
    }
}
