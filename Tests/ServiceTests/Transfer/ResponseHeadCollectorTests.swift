@testable import DownloaderEngine
import Testing

/// Which hop's head is reported, from libcurl's header lines.
@Suite struct ResponseHeadCollectorTests {
    private func feed(_ lines: [String], followsRedirects: Bool = true) -> [ResponseHeadCollector.Event] {
        var collector = ResponseHeadCollector(followsRedirects: followsRedirects)
        return lines.map { collector.consume(Array(($0 + "\r\n").utf8)) }.filter { $0 != .none }
    }

    @Test func plainResponse() {
        let events = feed(["HTTP/1.1 200 OK", "ETag: \"a\"", "Content-Length: 5", "X-Multi: 1", "x-multi: 2", ""])
        #expect(events == [.finalHead(status: 200, headers: [
            "etag": ["\"a\""], "content-length": ["5"], "x-multi": ["1", "2"],
        ])])
    }

    @Test func redirectHopsAndInterimResponsesAreSkipped() {
        let events = feed([
            "HTTP/1.1 302 Found", "Location: /b", "ETag: \"hop\"", "",
            "HTTP/1.1 100 Continue", "",
            "HTTP/1.1 103 Early Hints", "Link: </style.css>", "",
            "HTTP/1.1 206 Partial Content", "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT", "",
        ])
        #expect(events == [
            .interimHead(status: 302), .interimHead(status: 100), .interimHead(status: 103),
            .finalHead(status: 206, headers: ["last-modified": ["Tue, 14 Nov 2023 22:13:20 GMT"]]),
        ])
    }

    @Test func redirectWithoutLocationOrWithoutFollowingIsFinal() {
        #expect(feed(["HTTP/1.1 304 Not Modified", "ETag: \"x\"", ""])
            == [.finalHead(status: 304, headers: ["etag": ["\"x\""]])])
        #expect(feed(["HTTP/1.1 301 Moved", "Location: /x", ""], followsRedirects: false)
            == [.finalHead(status: 301, headers: ["location": ["/x"]])])
    }

    /// libcurl ignores an empty `Location` (the 3xx is then the answer) and follows the first
    /// one that is not empty.
    /// A Location's bytes beyond ASCII, UTF-8 or not, go on percent-encoded (as libcurl sends them).
    @Test func aLocationBeyondASCIIIsPercentEncoded() {
        var collector = ResponseHeadCollector(followsRedirects: false)
        for line in ["HTTP/1.1 302 Found", "Location: /caf\u{FFFF}", ""] {
            var bytes = Array((line + "\r\n").utf8)
            if line.hasPrefix("Location") { bytes = Array("Location: /caf".utf8) + [0xE9, 0x2F, 0xC3, 0xA9, 13, 10] }
            if case .finalHead(_, let headers) = collector.consume(bytes) {
                #expect(headers["location"] == ["/caf%E9/%C3%A9"])
                return
            }
        }
        Issue.record("no head")
    }

    @Test func anEmptyLocationIsNoRedirect() {
        #expect(feed(["HTTP/1.1 302 Found", "Location:  ", ""]) == [.finalHead(status: 302, headers: ["location": [""]])])
        #expect(feed(["HTTP/1.1 302 Found", "Location:", "Location: /x", ""]) == [.interimHead(status: 302)])
        #expect(ResponseHeadCollector.location(in: ["location": ["", "/x", "/y"]]) == "/x")
        #expect(ResponseHeadCollector.location(in: ["location": [""]]) == nil)
    }

    /// Lengths two readers could take differently are refused; repeats of one length are one.
    @Test(arguments: [
        (["5"], "5"), (["5", "5"], "5"), (["5, 5"], "5"), ([" 5 ,5\t"], "5"),
        (["5", "6"], nil), (["5, 6"], nil), (["-1"], nil), (["+5"], nil), (["5x"], nil), ([""], nil), (["5,"], nil),
        (["1 2"], nil), (["٣"], nil), (["99999999999999999999999"], nil), (["9223372036854775807"], "9223372036854775807"),
        (["05", "5"], "5"),
    ] as [([String], String?)])
    func contentLengths(values: [String], length: String?) {
        #expect(ResponseHeadCollector.contentLength(values) == length)
        let lines = ["HTTP/1.1 200 OK"] + values.map { "Content-Length: \($0)" } + [""]
        let expected: ResponseHeadCollector.Event = length.map { .finalHead(status: 200, headers: ["content-length": [$0]]) }
            ?? .invalid("conflicting or malformed Content-Length")
        #expect(feed(lines) == [expected])
    }

    /// A transfer coding frames the body: a Content-Length beside it is dropped (RFC 9112 §6.3).
    @Test func aTransferCodingOverridesContentLength() {
        #expect(feed(["HTTP/1.1 200 OK", "Transfer-Encoding: chunked", "Content-Length: 5", ""])
                == [.finalHead(status: 200, headers: ["transfer-encoding": ["chunked"]])])
        #expect(feed(["HTTP/1.1 200 OK", "Content-Length: x", "Transfer-Encoding: chunked", ""])
                == [.finalHead(status: 200, headers: ["transfer-encoding": ["chunked"]])])
    }

    @Test func valuesAreTrimmedAndFoldedLinesJoined() {
        #expect(feed(["HTTP/1.1 200 OK", "X-A:   spaced \t", "X-B: one", "  two", ""])
            == [.finalHead(status: 200, headers: ["x-a": ["spaced"], "x-b": ["one two"]])])
    }

    @Test(arguments: [
        ["HTTP/1.1 2000 OK"],
        ["HTTP/1.1 OK"],
        ["HTTP/1.1 099 Low"],
        ["Content-Length: 1"],
        ["HTTP/1.1 200 OK", ": empty name"],
        ["HTTP/1.1 200 OK", " folded first"],
    ])
    func malformedHeads(lines: [String]) {
        #expect(feed(lines).contains { if case .invalid = $0 { true } else { false } })
    }

    @Test func headSizeIsBounded() {
        var lines = ["HTTP/1.1 200 OK"]
        lines += Array(repeating: "X-Filler: " + String(repeating: "a", count: 1000), count: 300)
        #expect(feed(lines).contains { if case .invalid = $0 { true } else { false } })
    }
}
