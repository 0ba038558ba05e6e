import DownloaderEngine
import MiniHTTPServer
import Testing
@testable import DownloadService

/// The pure rules of forwarding: which fields go to the holder and come back, and which requests
/// are asked about at all.
@Suite struct ForwardedHeadersTests {
    @Test func onlyTheFieldsThatMatterGoToTheHolderThenTheMarker() {
        let headers = HTTPHeaders([
            ("Host", "b:8080"), ("authorization", "Bearer s"), ("Content-Type", "application/json"),
            ("Range", "bytes=5-"), ("If-Range", "\"e\""), ("If-None-Match", "\"e\""), ("Last-Event-ID", "41"),
            ("Accept", "text/event-stream"), ("X-Caller-Token", "tok"), ("Connection", "keep-alive, X-Secret"),
            ("X-Secret", "x"), ("Cookie", "c"), ("Content-Length", "12"), ("Transfer-Encoding", "chunked"),
            ("X-Forwarded-For", "10.0.0.1"), ("Accept-Encoding", "gzip"),
        ])
        let sent = ForwardedHeaders.request(headers, forwardedBy: "http://b:8080")
        #expect(sent.map(\.name) == ["authorization", "Content-Type", "Range", "If-Range", "If-None-Match", "Last-Event-ID",
                                     "Accept", "X-Caller-Token", ForwardedHeaders.marker])
        #expect(sent.last?.value == "http://b:8080")
        #expect(ForwardedHeaders.request(HTTPHeaders(), forwardedBy: nil).map(\.value) == ["1"])
        #expect(ForwardedHeaders.request(HTTPHeaders(), forwardedBy: "").map(\.value) == ["1"])
        #expect(ForwardedHeaders.request(HTTPHeaders([("Range", "a\r\nX: y")]), forwardedBy: "u\nv").map(\.value) == ["1"])
    }

    @Test func hopByHopAndServerOwnedFieldsStayBehind() {
        let answer: [(name: String, value: String)] = [
            ("Content-Type", "application/octet-stream"), ("Content-Length", "10"), ("Date", "x"), ("Connection", "close, X-Hop"),
            ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"), ("X-Hop", "1"), ("TE", "trailers"),
            ("Trailer", "X"), ("Upgrade", "h2c"), ("Proxy-Authenticate", "Basic"), ("ETag", "\"abc\""),
            ("Content-Range", "bytes 0-9/20"), ("X-Download-Id", "id1"), ("Location", "/downloads/id1"),
            ("Retry-After", "1"), ("Set-Cookie", "a=b"), ("Set-Cookie", "c=d"), ("X-Bad", "a\rb"),
        ]
        let relayed = ForwardedHeaders.response(answer)
        #expect(relayed.fields.map(\.name) == ["Content-Type", "ETag", "Content-Range", "X-Download-Id", "Location",
                                               "Retry-After", "Set-Cookie", "Set-Cookie"])
        #expect(relayed.values("Set-Cookie") == ["a=b", "c=d"])
    }

    @Test(arguments: [
        ([("Content-Length", "42")], Int64(42)),
        ([("content-length", " 0 ")], 0),
        ([("Content-Length", "42"), ("Content-Length", "42")], nil),
        ([("Content-Length", "-1")], nil),
        ([("Content-Length", "4 2")], nil),
        ([("Content-Length", "")], nil),
        ([("Content-Length", "99999999999999999999")], nil),
        ([("Content-Type", "x")], nil),
    ] as [([(String, String)], Int64?)])
    func contentLength(fields: [(String, String)], expected: Int64?) {
        #expect(ForwardedHeaders.contentLength(fields.map { (name: $0.0, value: $0.1) }) == expected)
    }

    @Test func theTargetGoesToTheHoldersURLAsSent() {
        #expect(ForwardedHeaders.url(ownerURL: "http://a:8080", target: "/fetch?url=http%3A%2F%2Fo%2Fx")
            == "http://a:8080/fetch?url=http%3A%2F%2Fo%2Fx")
        #expect(ForwardedHeaders.url(ownerURL: "http://a:8080//", target: "/downloads/x") == "http://a:8080/downloads/x")
        #expect(ForwardedHeaders.url(ownerURL: "https://a.svc/base", target: "x") == "https://a.svc/base/x")
    }

    @Test func whatIsAskedAboutBeforeActing() throws {
        func subject(_ method: String, _ target: String, body: String = "") -> String? {
            let request = Request(method: method, target: target, body: Array(body.utf8))
            guard let endpoint = Endpoint(path: request.path), let s = ForwardSubject.of(endpoint, request) else { return nil }
            switch s {
            case .request(let r): return "url \(r.url)"
            case .id(let id): return "id \(id)"
            case .token(let token): return "token \(token)"
            }
        }
        #expect(subject("POST", "/downloads", body: #"{"url":"https://o/x"}"#) == "url https://o/x")
        #expect(subject("POST", "/downloads", body: "{") == nil)
        #expect(subject("GET", "/downloads") == nil)
        #expect(subject("GET", "/downloads/abc") == "id abc")
        #expect(subject("HEAD", "/downloads/abc") == "id abc")
        #expect(subject("DELETE", "/downloads/tok") == "token tok")
        #expect(subject("GET", "/fetch?url=https%3A%2F%2Fo%2Fx") == "url https://o/x")
        #expect(subject("GET", "/fetch") == nil)
        for path in ["/downloads/abc/progress", "/downloads/abc/file", "/events", "/healthz", "/readyz", "/metrics", "/"] {
            #expect(subject("GET", path) == nil, "\(path)")
        }
        for (path, id) in [("/admin/downloads/abc", "abc"), ("/admin/downloads/d1/pause", "d1"), ("/admin/downloads/d2/resume", "d2")] {
            guard case .id(let got) = ForwardSubject.of(admin: try #require(AdminEndpoint(path: path))) else {
                Issue.record("\(path)")
                continue
            }
            #expect(got == id)
        }
        #expect(ForwardSubject.isStreamed(.fetch) && ForwardSubject.isStreamed(.file("x")))
        #expect(!ForwardSubject.isStreamed(.download("x")) && !ForwardSubject.isStreamed(.downloads))
    }
}
