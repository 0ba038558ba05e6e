import Foundation
import Testing
@testable import DownloadService
@testable import MiniHTTPServer

/// The service's rendering of the HTTP server's own errors (`ServerErrorJSON`, installed as
/// `ServerConfiguration.errorRenderer`): the codes, the JSON bytes, and whole answers on the wire.
@Suite struct ServerErrorJSONTests {
    /// The shape the server used to build itself with `JSONEncoder` (sorted keys, unescaped slashes).
    static func encoderBody(code: String, message: String) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return [UInt8](try encoder.encode(["error": ["code": code, "message": message]]))
    }

    @Test func codesByKindAndStatus() {
        let byStatus = [400: "bad_request", 404: "not_found", 408: "request_timeout", 413: "body_too_large",
                        414: "uri_too_long", 431: "headers_too_large", 500: "internal", 501: "not_implemented",
                        503: "unavailable", 505: "version_not_supported", 418: "error"]
        for (status, code) in byStatus {
            #expect(ServerErrorJSON.code(ServerError(status: status, kind: .invalidRequest, reason: "r")).rawValue == code)
        }
        #expect(ServerErrorJSON.code(ServerError(status: 408, kind: .requestTimeout, reason: "r")).rawValue == "request_timeout")
        let byKind: [(ServerError.Kind, Int, String)] = [
            (.handlerFailed, 500, "internal"), (.tooManyConnections, 503, "too_many_connections"),
            (.fileNotFound, 404, "not_found"), (.fileNotReadable, 403, "forbidden"), (.fileUnavailable, 500, "internal"),
            (.rangeNotSatisfiable, 416, "range_not_satisfiable"),
        ]
        for (kind, status, code) in byKind {
            #expect(ServerErrorJSON.code(ServerError(status: status, kind: kind, reason: "r")).rawValue == code, "\(kind)")
        }
    }

    @Test(arguments: ["request line too long", "HTTP/2.0 is not supported", #"a "quoted" \ reason"#, "ünïcode / slash", ""])
    func bodiesAreWhatJSONEncoderWrote(reason: String) throws {
        for kind in ServerError.Kind.allCases {
            let error = ServerError(status: kind == .tooManyConnections ? 503 : 400, kind: kind, reason: reason)
            let response = ServerErrorJSON.response(error)
            guard case .bytes(let body) = response.body else { Issue.record("no body for \(kind)"); continue }
            #expect(body == (try Self.encoderBody(code: ServerErrorJSON.code(error).rawValue, message: reason)), "\(kind)")
            #expect(response.status == error.status)
            #expect(response.headers.fields.map(\.name) == ["Content-Type"] && response.headers["Content-Type"] == "application/json")
        }
    }
}

/// Whole answers as the service sends them, byte for byte (`Date` and `Last-Modified` masked), from
/// a server with the service's renderer: what clients saw before the rendering moved to the service.
@Suite(.timeLimit(.minutes(1)))
struct ServerErrorWireTests {
    static let handler: HTTPHandler = { request in
        switch request.path {
        case "/throw": throw CancellationError()
        case "/missing": return Response(body: .file(FileResponse(path: "/nonexistent/download-service-test")))
        default:
            let path = request.headers["X-File"] ?? "/nonexistent"
            return Response(body: .file(FileResponse(path: path, contentType: "text/plain", etag: "\"e\"")))
        }
    }

    static func answer(_ request: String, headerTimeout: Double = 10,
                       configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in }) async throws -> String {
        try await withServer(configure: { c in
            c.eventLoopCount = 1
            c.headerTimeout = headerTimeout
            c.errorRenderer = ServerErrorJSON.response
            configure(&c)
        }, handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            defer { client.close() }
            try? await client.send(request)
            return masked(try await client.readToEnd())
        }
    }

    static func masked(_ bytes: [UInt8]) -> String {
        var text = String(decoding: bytes, as: UTF8.self)
        for field in ["Date", "Last-Modified"] {
            if let r = text.range(of: "\r\n\(field): [^\r]*\r\n", options: .regularExpression) {
                text.replaceSubrange(r, with: "\r\n\(field): X\r\n")
            }
        }
        return text
    }

    static func expected(_ head: [String], _ body: String) -> String {
        head.joined(separator: "\r\n") + "\r\n\r\n" + body
    }

    @Test func badRequest() async throws {
        let text = try await Self.answer("GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(text == Self.expected(["HTTP/1.1 400 Bad Request", "Content-Type: application/json", "Date: X",
                                       "Content-Length: 86", "Connection: close"],
                                      #"{"error":{"code":"bad_request","message":"both Content-Length and Transfer-Encoding"}}"#))
    }

    @Test func bodyTooLarge() async throws {
        let text = try await Self.answer("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 9999999\r\n\r\n")
        #expect(text == Self.expected(["HTTP/1.1 413 Content Too Large", "Content-Type: application/json", "Date: X",
                                       "Content-Length: 70", "Connection: close"],
                                      #"{"error":{"code":"body_too_large","message":"request body too large"}}"#))
    }

    @Test func requestTimeout() async throws {
        let text = try await Self.answer("GET / HTTP/1.1\r\nHost: t\r\n", headerTimeout: 1)
        #expect(text == Self.expected(["HTTP/1.1 408 Request Timeout", "Content-Type: application/json", "Date: X",
                                       "Content-Length: 77", "Connection: close"],
                                      #"{"error":{"code":"request_timeout","message":"request not received in time"}}"#))
    }

    @Test func handlerFailed() async throws {
        let text = try await Self.answer("GET /throw HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        #expect(text == Self.expected(["HTTP/1.1 500 Internal Server Error", "Content-Type: application/json", "Date: X",
                                       "Content-Length: 68", "Connection: close"],
                                      #"{"error":{"code":"internal","message":"the request handler failed"}}"#))
    }

    @Test func fileNotFoundAndRangeNotSatisfiable() async throws {
        let missing = try await Self.answer("GET /missing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        #expect(missing == Self.expected(["HTTP/1.1 404 Not Found", "Content-Type: application/json", "Date: X",
                                          "Content-Length: 57", "Connection: close"],
                                         #"{"error":{"code":"not_found","message":"file not found"}}"#))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("server-error-wire-\(UUID().uuidString)").path
        try Data("abc".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let unsatisfiable = try await Self.answer("GET /file HTTP/1.1\r\nHost: t\r\nX-File: \(file)\r\nRange: bytes=9-\r\nConnection: close\r\n\r\n")
        #expect(unsatisfiable == Self.expected(["HTTP/1.1 416 Range Not Satisfiable", "ETag: \"e\"", "Last-Modified: X",
                                                "Content-Range: bytes */3", "Content-Type: application/json", "Date: X",
                                                "Content-Length: 86", "Connection: close"],
                                               #"{"error":{"code":"range_not_satisfiable","message":"requested range not satisfiable"}}"#))
    }

    @Test func tooManyConnections() {
        let limiter = ConnectionLimiter(maxConnections: 1, maxConnectionsPerIP: 1, renderError: ServerErrorJSON.response)
        let head = ["HTTP/1.1 503 Service Unavailable", "Content-Type: application/json"]
        #expect(String(decoding: limiter.refusalBytes(.serverFull), as: UTF8.self)
            == Self.expected(head + ["Content-Length: 109", "Retry-After: 1", "Connection: close"],
                             #"{"error":{"code":"too_many_connections","message":"the server has too many open connections; retry shortly"}}"#))
        #expect(String(decoding: limiter.refusalBytes(.addressFull), as: UTF8.self)
            == Self.expected(head + ["Content-Length: 119", "Retry-After: 1", "Connection: close"],
                             #"{"error":{"code":"too_many_connections","message":"too many open connections from your address; close some and retry"}}"#))
    }
}
