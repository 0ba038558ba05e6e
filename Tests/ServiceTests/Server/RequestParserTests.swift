import Testing
@testable import MiniHTTPServer

@Suite("RequestParser")
struct RequestParserTests {
    static func parse(_ text: String, limits: ParserLimits = ParserLimits()) -> HeadParseResult {
        var parser = RequestParser(limits: limits)
        return Array(text.utf8).withUnsafeBufferPointer { parser.parse($0) }
    }

    static func status(_ text: String, limits: ParserLimits = ParserLimits()) -> Int? {
        if case .invalid(let failure) = parse(text, limits: limits) { return failure.status }
        return nil
    }

    struct Rejection: Sendable, CustomStringConvertible {
        var name: String
        var raw: String
        var status: Int
        var description: String { name }
    }

    static let rejections: [Rejection] = [
        Rejection(name: "CL and TE", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
        Rejection(name: "differing CL", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", status: 400),
        Rejection(name: "duplicate CL", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", status: 400),
        Rejection(name: "CL list", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", status: 400),
        Rejection(name: "non-numeric CL", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", status: 400),
        Rejection(name: "negative CL", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", status: 400),
        Rejection(name: "plus CL", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", status: 400),
        Rejection(name: "TE gzip", raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400),
        Rejection(name: "TE gzip, chunked", raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 400),
        Rejection(name: "TE twice", raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
        Rejection(name: "TE on 1.0", raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
        Rejection(name: "space before colon", raw: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", status: 400),
        Rejection(name: "tab before colon", raw: "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", status: 400),
        Rejection(name: "NUL in value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n", status: 400),
        Rejection(name: "control char in value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{1}b\r\n\r\n", status: 400),
        Rejection(name: "DEL in value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{7F}b\r\n\r\n", status: 400),
        Rejection(name: "NUL in name", raw: "GET / HTTP/1.1\r\nHost: a\r\nX\u{0}Y: b\r\n\r\n", status: 400),
        Rejection(name: "bare CR in value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", status: 400),
        Rejection(name: "bare LF line", raw: "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", status: 400),
        Rejection(name: "obs-fold", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n  b\r\n\r\n", status: 400),
        Rejection(name: "missing Host on 1.1", raw: "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", status: 400),
        Rejection(name: "two Hosts", raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400),
        Rejection(name: "empty name", raw: "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", status: 400),
        Rejection(name: "no colon", raw: "GET / HTTP/1.1\r\nHost: a\r\nJunk\r\n\r\n", status: 400),
        Rejection(name: "HTTP/0.9", raw: "GET /\r\n\r\n", status: 505),
        Rejection(name: "HTTP/2.0", raw: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", status: 505),
        Rejection(name: "HTTP/0.9 version", raw: "GET / HTTP/0.9\r\nHost: a\r\n\r\n", status: 505),
        Rejection(name: "garbage version", raw: "GET / HTTQ/1.1\r\nHost: a\r\n\r\n", status: 400),
        Rejection(name: "double space", raw: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400),
        Rejection(name: "bad method char", raw: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400),
        Rejection(name: "control in target", raw: "GET /a\u{1}b HTTP/1.1\r\nHost: a\r\n\r\n", status: 400),
        // A fragment is never sent: a target holding `#` is refused, not forwarded cut short.
        Rejection(name: "fragment in target", raw: "GET /fetch?url=http://h/f#x&sha256=0 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400),
        Rejection(name: "body too large", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n", status: 413),
        Rejection(name: "huge CL", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", status: 400),
        Rejection(name: "request line too long", raw: "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", status: 414),
        Rejection(name: "request line too long, incomplete", raw: "GET /" + String(repeating: "a", count: 9000), status: 414),
        Rejection(name: "headers too large", raw: "GET / HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X-Long: " + String(repeating: "v", count: 1000) + "\r\n", count: 70) + "\r\n", status: 431),
        Rejection(name: "headers too large, incomplete", raw: "GET / HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X-Long: " + String(repeating: "v", count: 1000) + "\r\n", count: 70), status: 431),
        Rejection(name: "too many headers", raw: "GET / HTTP/1.1\r\nHost: a\r\n" + (0..<101).map { "X-\($0): v\r\n" }.joined() + "\r\n", status: 431),
    ]

    @Test("rejects malformed and oversized requests", arguments: rejections)
    func rejects(_ case_: Rejection) {
        #expect(Self.status(case_.raw) == case_.status, "\(case_.name)")
    }

    @Test func parsesSimpleGet() throws {
        guard case .head(let head, let consumed) = Self.parse("GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Y:  z \r\n\r\nNEXT") else {
            Issue.record("expected head"); return
        }
        #expect(head.method == "GET")
        #expect(head.target == "/a?b=1")
        #expect(head.version == (1, 1))
        #expect(head.headers["x-y"] == "z")
        #expect(head.keepAlive)
        #expect(head.framing == .none)
        #expect(consumed == "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Y:  z \r\n\r\n".utf8.count)
    }

    @Test func keepAliveRules() {
        func keepAlive(_ raw: String) -> Bool? {
            if case .head(let head, _) = Self.parse(raw) { return head.keepAlive }
            return nil
        }
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == true)
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, Close\r\n\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.0\r\n\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == true)
    }

    @Test func bodyFraming() {
        func framing(_ raw: String) -> BodyFraming? {
            if case .head(let head, _) = Self.parse(raw) { return head.framing }
            return nil
        }
        #expect(framing("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n") == .length(12))
        #expect(framing("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n") == BodyFraming.none)
        #expect(framing("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n") == .chunked)
    }

    @Test func partialInputNeedsMoreDataAtEveryPrefix() {
        let raw = Array("\r\nGET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n".utf8)
        var parser = RequestParser(limits: ParserLimits())
        for end in 0..<raw.count {
            let result = Array(raw[..<end]).withUnsafeBufferPointer { parser.parse($0) }
            guard case .needMoreData = result else {
                Issue.record("prefix of \(end) bytes: \(result)")
                return
            }
        }
        let final = raw.withUnsafeBufferPointer { parser.parse($0) }
        guard case .head(let head, let consumed) = final else { Issue.record("no head"); return }
        #expect(head.target == "/x")
        #expect(consumed == raw.count)
    }

    @Test func earlyVersionRejectionBeforeHeadEnds() {
        #expect(Self.status("GET / HTTP/2.0\r\nHost") == 505)
        #expect(Self.status("GET /index.html\r\n") == 505)
    }

    @Test func configuredLimitsApply() {
        var limits = ParserLimits()
        limits.maxHeaderCount = 2
        #expect(Self.status("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", limits: limits) == 431)
        limits.maxRequestLineBytes = 10
        #expect(Self.status("GET /abcdefghijk HTTP/1.1\r\nHost: a\r\n\r\n", limits: limits) == 414)
    }
}
