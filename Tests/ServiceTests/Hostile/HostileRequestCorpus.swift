/// Request-smuggling and malformed requests for `SmugglingCorpusTests`, as exact bytes.
///
/// `rejected`: each must be answered with `status` (a JSON error) and the connection closed.
/// `framed`: obfuscations RFC 9112 allows (OWS around a value, case), which must be framed exactly
/// one way: the body is the chunked decoding and the bytes after it are the next request.
enum HostileRequestCorpus {
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var bytes: [UInt8]
        var status: Int
        var description: String { name }

        init(_ name: String, _ text: String, _ status: Int = 400) {
            self.name = name
            self.bytes = Array(text.utf8)
            self.status = status
        }
    }

    /// A request line and `Host`, then `fields` (each ending in CRLF), then a blank line and `body`.
    static func post(_ fields: String, _ body: String = "", version: String = "HTTP/1.1") -> String {
        "POST /upload \(version)\r\nHost: test\r\n\(fields)\r\n\(body)"
    }

    static func chunked(_ body: String) -> String { post("Transfer-Encoding: chunked\r\n", body) }

    static let smuggled = "GET /smuggled HTTP/1.1\r\nHost: test\r\n\r\n"

    static let rejected: [Case] = framing + fieldSyntax + sizes + chunkedBodies + requestLines

    /// CL.TE, TE.CL, TE.TE obfuscations, duplicate and malformed Content-Length.
    static let framing: [Case] = [
        Case("CL.TE", post("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\nG")),
        Case("TE.CL", post("Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", "5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n")),
        Case("CL.TE with a zero length", post("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n")),
        Case("TE xchunked", post("Transfer-Encoding: xchunked\r\n", "0\r\n\r\n")),
        Case("TE chunked, identity", post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n")),
        Case("TE identity, chunked", post("Transfer-Encoding: identity, chunked\r\n", "0\r\n\r\n")),
        Case("TE chunked, chunked", post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n")),
        Case("TE identity", post("Transfer-Encoding: identity\r\n", "0\r\n\r\n")),
        Case("TE gzip", post("Transfer-Encoding: gzip\r\n", "0\r\n\r\n")),
        Case("TE quoted", post("Transfer-Encoding: \"chunked\"\r\n", "0\r\n\r\n")),
        Case("TE empty", post("Transfer-Encoding: \r\n", "0\r\n\r\n")),
        Case("TE duplicated", post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n")),
        Case("TE duplicated, second identity", post("Transfer-Encoding: chunked\r\ntransfer-encoding: identity\r\n", "0\r\n\r\n")),
        Case("TE space before colon", post("Transfer-Encoding : chunked\r\n", "0\r\n\r\n")),
        Case("TE tab before colon", post("Transfer-Encoding\t: chunked\r\n", "0\r\n\r\n")),
        Case("TE folded onto the next line", post("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n")),
        Case("TE line with leading space", post(" Transfer-Encoding: chunked\r\n", "0\r\n\r\n")),
        Case("TE vertical tab before value", post("Transfer-Encoding:\u{0B}chunked\r\n", "0\r\n\r\n")),
        Case("TE form feed after value", post("Transfer-Encoding: chunked\u{0C}\r\n", "0\r\n\r\n")),
        Case("TE NUL after value", post("Transfer-Encoding: chunked\u{00}\r\n", "0\r\n\r\n")),
        Case("TE on HTTP/1.0", post("Transfer-Encoding: chunked\r\n", "0\r\n\r\n", version: "HTTP/1.0")),
        Case("CL duplicated, same value", post("Content-Length: 3\r\nContent-Length: 3\r\n", "abc")),
        Case("CL conflicting", post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd")),
        Case("CL list", post("Content-Length: 3, 3\r\n", "abc")),
        Case("CL +5", post("Content-Length: +5\r\n", "hello")),
        Case("CL -1", post("Content-Length: -1\r\n")),
        Case("CL 0x10", post("Content-Length: 0x10\r\n", String(repeating: "a", count: 16))),
        Case("CL empty", post("Content-Length: \r\n")),
        Case("CL with inner space", post("Content-Length: 1 0\r\n", "0123456789")),
        Case("CL 1e3", post("Content-Length: 1e3\r\n")),
        Case("CL overflowing Int64", post("Content-Length: 99999999999999999999999\r\n")),
        Case("CL over the body limit", post("Content-Length: 1048577\r\n"), 413),
    ]

    /// Line endings, control bytes and field syntax.
    static let fieldSyntax: [Case] = [
        Case("bare LF everywhere", "GET / HTTP/1.1\nHost: test\n\n"),
        Case("Host with a space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n"),
        Case("Host with a slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
        Case("Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"),
        Case("bare LF after a field", "GET / HTTP/1.1\r\nHost: test\nX-A: b\r\n\r\n"),
        Case("bare LF ending the head", "GET / HTTP/1.1\r\nHost: test\r\n\n", 408),
        Case("bare CR in the request line", "GET / HTTP/1.1\rHost: test\r\n\r\n"),
        Case("bare CR in a value", "GET / HTTP/1.1\r\nHost: test\r\nX-A: b\rc\r\n\r\n"),
        Case("bare CR ending a field", "GET / HTTP/1.1\r\nHost: test\r\nX-A: b\r\r\n\r\n"),
        Case("NUL in a field name", "GET / HTTP/1.1\r\nHost: test\r\nX\u{00}A: b\r\n\r\n"),
        Case("NUL in a field value", "GET / HTTP/1.1\r\nHost: test\r\nX-A: b\u{00}c\r\n\r\n"),
        Case("NUL in the target", "GET /a\u{00}b HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("NUL before the method", "\u{00}GET / HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("DEL in a value", "GET / HTTP/1.1\r\nHost: test\r\nX-A: b\u{7F}\r\n\r\n"),
        Case("whitespace before colon", "GET / HTTP/1.1\r\nHost : test\r\n\r\n"),
        Case("obs-fold", "GET / HTTP/1.1\r\nHost: test\r\nX-A: b\r\n  c\r\n\r\n"),
        Case("field without colon", "GET / HTTP/1.1\r\nHost: test\r\nX-A\r\n\r\n"),
        Case("empty field name", "GET / HTTP/1.1\r\nHost: test\r\n: b\r\n\r\n"),
        Case("separator in a field name", "GET / HTTP/1.1\r\nHost: test\r\nX(A): b\r\n\r\n"),
        Case("no Host on HTTP/1.1", "GET / HTTP/1.1\r\nX-A: b\r\n\r\n"),
        Case("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    ]

    /// Limits: request line, header section, field count.
    static let sizes: [Case] = [
        Case("huge request line", "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: test\r\n\r\n", 414),
        Case("huge request line without an end", "GET /" + String(repeating: "a", count: 20_000), 414),
        Case("huge header section", "GET / HTTP/1.1\r\nHost: test\r\n"
            + String(repeating: "X-Padding: " + String(repeating: "p", count: 1000) + "\r\n", count: 70) + "\r\n", 431),
        Case("huge single field", "GET / HTTP/1.1\r\nHost: test\r\nX-Big: " + String(repeating: "b", count: 70_000) + "\r\n\r\n", 431),
        Case("huge header section without an end", "GET / HTTP/1.1\r\nHost: test\r\nX-Big: " + String(repeating: "b", count: 70_000), 431),
        Case("too many fields", "GET / HTTP/1.1\r\nHost: test\r\n"
            + (1...101).map { "X-\($0): v\r\n" }.joined() + "\r\n", 431),
    ]

    /// Chunked bodies after a valid head.
    static let chunkedBodies: [Case] = [
        Case("chunk size not hex", chunked("zz\r\nab\r\n0\r\n\r\n")),
        Case("chunk size negative", chunked("-1\r\nx\r\n0\r\n\r\n")),
        Case("chunk size 0x prefix", chunked("0x5\r\nhello\r\n0\r\n\r\n")),
        Case("chunk size with inner space", chunked("1 2\r\nx\r\n0\r\n\r\n")),
        Case("chunk size with leading space", chunked(" 5\r\nhello\r\n0\r\n\r\n")),
        Case("chunk size empty", chunked("\r\nx\r\n0\r\n\r\n")),
        Case("chunk size overflowing Int64", chunked("ffffffffffffffffff\r\nx\r\n0\r\n\r\n")),
        Case("chunk size just under overflow", chunked("7fffffffffffffff\r\nx\r\n0\r\n\r\n")),
        Case("chunk size over the body limit", chunked("100001\r\nx\r\n0\r\n\r\n"), 413),
        Case("chunks summing over the body limit", chunked("80000\r\n" + String(repeating: "a", count: 0x80000)
            + "\r\n80001\r\n"), 413),
        Case("chunk extension with NUL", chunked("1;a\u{00}b\r\nx\r\n0\r\n\r\n")),
        Case("chunk extension with bare CR", chunked("1;a\rb\r\nx\r\n0\r\n\r\n")),
        Case("chunk extension too long", chunked("1;" + String(repeating: "e", count: 5000) + "\r\nx\r\n0\r\n\r\n")),
        Case("chunk size line with bare LF", chunked("1\nx\r\n0\r\n\r\n")),
        Case("chunk data longer than its size", chunked("3\r\nabcdef\r\n0\r\n\r\n")),
        Case("chunk data with bare LF after it", chunked("3\r\nabc\n0\r\n\r\n")),
        Case("trailer without colon", chunked("0\r\nno colon here\r\n\r\n")),
        Case("trailer with space before colon", chunked("0\r\nX-T : v\r\n\r\n")),
        Case("trailer section too large", chunked("0\r\n" + String(repeating: "X-T: " + String(repeating: "t", count: 1000) + "\r\n", count: 70) + "\r\n"), 431),
    ]

    /// Request lines and versions, absolute-form oddities the parser can see.
    static let requestLines: [Case] = [
        Case("HTTP/0.9 request line", "GET /\r\n\r\n", 505),
        Case("HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: test\r\n\r\n", 505),
        Case("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        Case("HTTP/3.1", "GET / HTTP/3.1\r\nHost: test\r\n\r\n", 505),
        Case("HTTP/1.10", "GET / HTTP/1.10\r\nHost: test\r\n\r\n"),
        Case("lowercase version", "GET / http/1.1\r\nHost: test\r\n\r\n"),
        Case("version without minor", "GET / HTTP/1\r\nHost: test\r\n\r\n"),
        Case("two spaces after the method", "GET  / HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("tab as separator", "GET\t/ HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("space inside an absolute-form target", "GET http://a b/ HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("DEL in an absolute-form target", "GET http://a\u{7F}b/ HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("method with a separator", "G(ET / HTTP/1.1\r\nHost: test\r\n\r\n"),
        Case("empty request line then garbage", "\r\n\u{01}\r\n\r\n"),
        Case("trailing space after the version", "GET / HTTP/1.1 \r\nHost: test\r\n\r\n"),
    ]

    /// Allowed obfuscations: `expect` is the bodies the handler must see, in order ("METHOD path body").
    struct Framed: Sendable, CustomStringConvertible {
        var name: String
        var bytes: [UInt8]
        var expect: [String]
        var description: String { name }

        init(_ name: String, _ text: String, _ expect: [String]) {
            self.name = name
            self.bytes = Array(text.utf8)
            self.expect = expect
        }
    }

    static let framed: [Framed] = [
        Framed("TE with a tab before the value", post("Transfer-Encoding:\tchunked\r\n", "3\r\nabc\r\n0\r\n\r\n" + smuggled),
               ["POST /upload abc", "GET /smuggled "]),
        Framed("TE with trailing whitespace", post("Transfer-Encoding: chunked \t\r\n", "3\r\nabc\r\n0\r\n\r\n" + smuggled),
               ["POST /upload abc", "GET /smuggled "]),
        Framed("TE in upper case", post("TRANSFER-ENCODING: CHUNKED\r\n", "3\r\nabc\r\n0\r\n\r\n" + smuggled),
               ["POST /upload abc", "GET /smuggled "]),
        Framed("chunk extensions and a trailer", chunked("3;a=b;c=\"d\"\r\nabc\r\n0;x\r\nX-T: v\r\n\r\n" + smuggled),
               ["POST /upload abc", "GET /smuggled "]),
        Framed("body that looks like a request", post("Content-Length: \(smuggled.utf8.count)\r\n", smuggled),
               ["POST /upload \(smuggled)"]),
        Framed("Content-Length 0 then a request", post("Content-Length: 0\r\n", smuggled),
               ["POST /upload ", "GET /smuggled "]),
        Framed("empty lines before the request line", "\r\n\r\n" + smuggled, ["GET /smuggled "]),
        Framed("absolute-form target: its path", "GET http://elsewhere.example/x?y HTTP/1.1\r\nHost: test\r\n\r\n",
               ["GET /x "]),
    ]
}
