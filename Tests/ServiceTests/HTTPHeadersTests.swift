import Testing
@testable import MiniHTTPServer

@Suite struct HTTPHeadersTests {
    @Test func lookupIsCaseInsensitiveAndKeepsOrder() {
        var h: HTTPHeaders = ["Content-Type": "text/plain", "X-A": "1"]
        h.add("x-a", "2")
        #expect(h["content-type"] == "text/plain")
        #expect(h.values("X-a") == ["1", "2"])
        h["X-A"] = "3"
        #expect(h.values("x-a") == ["3"])
        #expect(!"ab".caseInsensitiveEquals("a["))
        #expect("Host".caseInsensitiveEquals("hOST"))
    }

    @Test func requestSplitsPathAndQuery() {
        let r = Request(method: "GET", target: "/downloads?state=paused&x=a%20b+c")
        #expect(r.path == "/downloads")
        #expect(r.queryItems.map(\.name) == ["state", "x"])
        #expect(r.queryItems.map(\.value) == ["paused", "a b c"])
    }
}
