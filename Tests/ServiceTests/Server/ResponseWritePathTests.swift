import Foundation
import Testing
@testable import MiniHTTPServer

/// Byte responses go out from the loop's write buffer in one send when they fit (what the socket
/// does not take is copied into the connection's queue), or from an array when they do not.
@Suite("HTTPServer byte-response write path")
struct ResponseWritePathTests {
    /// A body of the request number's byte, its first and last bytes marking where it starts and
    /// ends (a lost, repeated or misplaced piece breaks the comparison).
    static func body(_ n: Int, size: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: size)
        bytes[0] = 0xAA
        bytes[size - 1] = 0x55
        return bytes
    }

    @Test func pipelinedResponsesBeyondTheSocketBuffersArriveIntact() async throws {
        // 60 KiB fits the 64 KiB write buffer; 100 KiB does not (array path). 48 pipelined
        // requests queue ~3.7 MiB while the client reads nothing: sends go partial and block.
        let handler: HTTPHandler = { request in
            let n = Int(request.path.dropFirst(1)) ?? 0
            return Response(body: .bytes(Self.body(n, size: n % 2 == 0 ? 60 * 1024 : 100 * 1024)))
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            try await client.send((0..<48).map { get("/\($0)") }.joined())
            for n in 0..<48 {
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.body == Self.body(n, size: n % 2 == 0 ? 60 * 1024 : 100 * 1024), "response \(n)")
            }
        }
    }

    @Test func manyHeadersStillFitOrFallBack() async throws {
        // A head larger than the write buffer takes the array path; a normal one the buffer.
        let big = String(repeating: "v", count: 8 * 1024)
        let handler: HTTPHandler = { request in
            var headers = HTTPHeaders()
            if request.path == "/big" { for i in 0..<10 { headers.add("X-Big-\(i)", big) } }
            return Response(headers: headers, body: .bytes(Array("body".utf8)))
        }
        try await withServer(handler: handler) { port in
            let client = try await RawHTTPClient.connect(port: port)
            for path in ["/big", "/small", "/big"] {
                try await client.send(get(path))
                let response = try await client.readResponse()
                #expect(response.bodyText == "body")
                #expect(response.header("X-Big-9") == (path == "/big" ? big : nil))
                #expect(response.header("Date")?.count == 29)
            }
        }
    }
}
