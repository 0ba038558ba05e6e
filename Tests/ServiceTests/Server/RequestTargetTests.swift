import Testing
@testable import MiniHTTPServer

/// The request-target's forms (RFC 9112 §3.2): the absolute form is taken as its path and query,
/// its authority replacing `Host`; other absolute URIs are refused; the rest is left as sent.
struct RequestTargetTests {
    static let cases: [(String, RequestTarget)] = [
        ("/fetch?url=http://o/f", .asSent),
        ("*", .asSent),
        ("origin.test:443", .asSent),
        ("junk", .asSent),
        ("http://svc:8080/fetch?url=http://o/f", .absolute(target: "/fetch?url=http://o/f", host: "svc:8080")),
        ("HTTPS://Svc/downloads", .absolute(target: "/downloads", host: "Svc")),
        ("http://svc", .absolute(target: "/", host: "svc")),
        ("http://svc?x=1", .absolute(target: "/?x=1", host: "svc")),
        ("http://[::1]:8080/healthz", .absolute(target: "/healthz", host: "[::1]:8080")),
        ("ftp://svc/file", .invalid("unsupported scheme in request target")),
        ("http:///path", .invalid("request target without a host")),
        ("http://:8080/path", .invalid("request target without a host")),
        ("http://user:pw@svc/path", .invalid("userinfo in request target")),
        ("http://sv\"c/path", .invalid("invalid host in request target")),
    ]

    @Test(arguments: cases)
    func classifies(_ target: String, _ expected: RequestTarget) {
        #expect(RequestTarget.classify(target) == expected, "\(target)")
    }

    @Test func theAbsoluteFormsAuthorityReplacesHost() throws {
        let raw = "GET http://svc.example:9/downloads?state=paused HTTP/1.1\r\nHost: other\r\nAccept: */*\r\n\r\n"
        guard case .head(let head, _) = RequestParserTests.parse(raw) else { Issue.record("expected a head"); return }
        #expect(head.target == "/downloads?state=paused")
        #expect(head.request.path == "/downloads" && head.request.query == "state=paused")
        #expect(head.headers.values("Host") == ["svc.example:9"])
    }

    @Test func anHTTP10AbsoluteTargetWithoutHostGetsNoField() throws {
        guard case .head(let head, _) = RequestParserTests.parse("GET http://svc/healthz HTTP/1.0\r\n\r\n") else {
            Issue.record("expected a head"); return
        }
        #expect(head.target == "/healthz" && head.headers.count == 0)
    }

    @Test func anAbsoluteTargetStillNeedsHostOnHTTP11() {
        #expect(RequestParserTests.status("GET http://svc/ HTTP/1.1\r\n\r\n") == 400)
        #expect(RequestParserTests.status("GET ftp://svc/ HTTP/1.1\r\nHost: svc\r\n\r\n") == 400)
    }
}
